"""Git plumbing for tests: a branch with one commit in a sandbox repository, the refs of
one, a repository's clone URL as the API gives it, a `git` that holds a branch push until
the test lets it go, and a local work tree with one file committed over its base."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

from bot.lifecycle.worktree import RemoteState, Worktree
from github_sandbox.git import SANDBOX_AUTHOR

if TYPE_CHECKING:
    from tests.conftest import GitHubSandbox


def _plumbing(git_path: object) -> Callable[..., str]:
    """git plumbing in the bare repository at `git_path`, as the sandbox's author."""
    path = Path(str(git_path))

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", "-C", str(path), *args],
            input=stdin,
            text=True,
            capture_output=True,
            check=True,
            env={**os.environ, **SANDBOX_AUTHOR},
        )
        return done.stdout.strip()

    return run


def branch_with_file(git_path: object, branch: str, name: str, text: str) -> str:
    """`branch` = main plus the file `name` holding `text` (one commit); its sha."""
    run = _plumbing(git_path)
    blob = run("hash-object", "-w", "--stdin", stdin=text)
    entries = run("ls-tree", "refs/heads/main").splitlines()
    entries = [e for e in entries if e.split("\t", 1)[1] != name]
    tree = run("mktree", stdin="".join(f"{e}\n" for e in entries) + f"100644 blob {blob}\t{name}\n")
    commit = run("commit-tree", tree, "-p", "refs/heads/main", "-m", f"Add {name}")
    run("update-ref", f"refs/heads/{branch}", commit)
    return commit


def branch_with_commit(git_path: object, branch: str) -> None:
    run = _plumbing(git_path)
    blob = run("hash-object", "-w", "--stdin", stdin="change\n")
    tree = run("mktree", stdin=f"100644 blob {blob}\tchange.txt\n")
    commit = run("commit-tree", tree, "-p", "refs/heads/main", "-m", "change")
    run("update-ref", f"refs/heads/{branch}", commit)


def held_push_git(folder: Path, held: Path, go: Path) -> Path:
    """A `bin/` folder whose `git` is the real one, except that a push of a branch
    (`refs/heads/...`) first writes its parent's pid (the worker process that pushes) to
    `held` and waits (at most ten minutes) for `go` to exist: the stall between a run's
    last lease check and its push, where a test can freeze that worker. Put it first on
    the worker's PATH."""
    real = shutil.which("git")
    assert real is not None, "git is not installed"
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "git"
    script.write_text(
        "#!/bin/sh\n"
        'case " $* " in\n'
        '  *" push "*refs/heads/*)\n'
        f'    echo "$PPID" > {shlex.quote(str(held))}\n'
        "    tries=0\n"
        f"    while [ ! -e {shlex.quote(str(go))} ] && [ $tries -lt 12000 ]; do\n"
        "      sleep 0.05; tries=$((tries + 1))\n"
        "    done ;;\n"
        "esac\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    script.chmod(0o755)
    return bin_dir


def remote_refs(git_path: object) -> dict[str, str]:
    """Every ref of a sandbox repository (branches and fence refs) and its commit."""
    listed = subprocess.run(
        ["git", "-C", str(git_path), "for-each-ref", "--format=%(refname) %(objectname)"],
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    return dict(line.split(" ", 1) for line in listed.splitlines())


async def seeded_origin(tmp_path: Path) -> Path:
    """`tmp_path/origin.git`: a bare repository whose `main` holds one commit (README.md),
    made with the worker's own git helper."""
    from bot.lifecycle import worktree

    origin = tmp_path / "origin.git"
    seed = tmp_path / "seed"
    await worktree.git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(origin))
    await worktree.git(tmp_path, "init", "--quiet", "-b", "main", str(seed))
    (seed / "README.md").write_text("hello\n")
    await worktree.git(seed, "add", "README.md")
    await worktree.git(seed, "commit", "--quiet", "-m", "seed")
    await worktree.git(seed, "push", "--quiet", str(origin), "main")
    return origin


async def clone_url(github_sandbox: GitHubSandbox, repo: str, token: str) -> str:
    """`repo`'s `clone_url` as the sandbox's REST API gives it to `token`."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{github_sandbox.url}/repos/{repo}", headers={"Authorization": f"token {token}"}
        ) as response,
    ):
        assert response.status == 200
        return str((await response.json())["clone_url"])


def commit_files(git_path: object, files: dict[str, str], branch: str = "main") -> str:
    """Commit `files` ({path: text}) on top of `branch` of a sandbox repository, as a
    person pushing to it would (the repository's config, a changed lockfile)."""
    path = Path(str(git_path))
    env = {**os.environ, **SANDBOX_AUTHOR}
    index = path / f"seed-index-{os.getpid()}"

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", "-C", str(path), *args],
            input=stdin,
            text=True,
            capture_output=True,
            check=True,
            env={**env, "GIT_INDEX_FILE": str(index)},
        )
        return done.stdout.strip()

    try:
        run("read-tree", f"refs/heads/{branch}")
        for name, text in files.items():
            blob = run("hash-object", "-w", "--stdin", stdin=text)
            run("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
        tree = run("write-tree")
        commit = run("commit-tree", tree, "-p", f"refs/heads/{branch}", "-m", "seed files")
        run("update-ref", f"refs/heads/{branch}", commit)
    finally:
        index.unlink(missing_ok=True)
    return commit


def git_as_tester(cwd: Path, *args: str) -> None:
    """`git args` in `cwd` as a test's own committer (no global identity needed)."""
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", *identity, *args], cwd=cwd, check=True, capture_output=True)


def local_tree(path: Path) -> Worktree:
    """The work tree of the local repository at `path` (branch `work` over `main`, no
    remote), as a run's steps read it."""
    return Worktree(
        path=path,
        branch="work",
        base="main",
        resumed=False,
        git_dir=path / ".git",
        url="",
        remote=RemoteState(branch_sha="", fence_sha=""),
    )


def committed_over_base(folder: Path, name: str, text: str) -> Worktree:
    """A repository in `folder` whose branch holds one commit writing `text` to `name` over
    an empty base (`origin/main`), as a run's work tree is before its push is scanned."""
    git_as_tester(folder, "init", "--quiet", "--initial-branch=main")
    git_as_tester(folder, "commit", "--quiet", "--allow-empty", "-m", "base")
    git_as_tester(folder, "update-ref", "refs/remotes/origin/main", "HEAD")
    (folder / name).write_text(text)
    git_as_tester(folder, "add", name)
    git_as_tester(folder, "commit", "--quiet", "-m", name)
    return local_tree(folder)
