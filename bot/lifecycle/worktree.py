"""An isolated clone of the task's repository under `data_dir/worktrees`, and its branch.

The worker's git directory (`folder/git`) lives outside the tree the coding runtime works
in (`folder/repo`); the runtime gets its own throwaway repository there, with no remote.
So nothing the runtime writes (a `.git/config` remote, filters, hooks) reaches a git
command the worker runs with the installation token. Every worker git command runs with
no global or system config, no hooks, no fsmonitor and a minimal environment; the token
goes as an HTTP header scoped to the clone URL's origin, never into a config file. The few
variables git is given come from the worker's environment read at its start
(`WorkerEnvironment.variables`, carried by the `Worktree`), not from `os.environ` per job.

Pushes are fenced on the remote itself: a run first claims its branch (`claim`: the
branch's fence ref, `refs/steelframe/fence/<branch>`, now points at a commit of this run's
own), and its push is one atomic compare-and-swap (`push`: the fence ref and the branch
move together, and only if both still hold what this run last saw). A run whose branch
another run claimed since (it lost its lease) changes nothing on the remote.

Steps that reach the remote (claim, clone, push) are tried again, a few times with backoff,
when git says the failure was on the way or in the remote (a 5xx, a 429, a dropped
connection), so a blip of GitHub's does not throw away a whole coding run. A push whose
answer was lost is found landed on the remote rather than pushed twice.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import secrets
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 300.0
# Waits before the second and third try of a step that reaches the remote.
REMOTE_RETRY_DELAYS = (1.0, 4.0)
# What git prints when a request failed on the way or in the remote rather than being
# refused: an HTTP status git names (5xx, 429), or, with none named, a lost connection.
HTTP_STATUS = re.compile(r"(?:returned error:|HTTP) (\d{3})")
LOST_CONNECTION = re.compile(
    r"Could not resolve host|Failed to connect|Connection (?:refused|reset|timed out)"
    r"|early EOF|unexpected disconnect|hung up unexpectedly|Empty reply from server"
)
BOT_NAME = "steelframe[bot]"
BOT_EMAIL = "steelframe-bot@users.noreply.github.com"
SAFE_OPTIONS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "protocol.ext.allow=never",
)
# The only parts of the worker's environment git needs; everything else (PRIVATE_KEY,
# WEBHOOK_SECRET, API keys, database and Redis URLs) stays out of git's processes.
FENCE_PREFIX = "refs/steelframe/fence/"
PASSED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
)


class WorktreeError(Exception):
    """A git step failed; the message names the step and git's own complaint. `transient`:
    git said the request failed on the way or in the remote (worth another try)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def is_transient(stderr: str) -> bool:
    """True if git's complaint is a failure of the remote or the network, not a refusal
    (401, 403, 404, a rejected push), judged by the HTTP statuses it names, else by how
    the connection ended."""
    statuses = HTTP_STATUS.findall(stderr)
    if statuses:
        return all(code.startswith("5") or code == "429" for code in statuses)
    return LOST_CONNECTION.search(stderr) is not None


@dataclass
class RemoteState:
    """What this run knows the remote holds, which its push requires to still hold: the
    branch's commit ("" when the branch does not exist) and this run's claim on the
    branch's fence ref ("" when it made none)."""

    branch_sha: str
    fence_sha: str


@dataclass(frozen=True)
class Claim:
    """A run's claim on a branch: where, and what the remote's fence ref holds for it
    (`remote.fence_sha`, moved by each of the run's pushes)."""

    url: str
    branch: str
    remote: RemoteState


@dataclass(frozen=True)
class Worktree:
    path: Path  # the runtime's working tree
    branch: str
    base: str
    resumed: bool  # the branch already existed on the remote (a continuation)
    git_dir: Path  # the worker's own git directory, outside `path`
    url: str  # where the worker pushes: the clone URL, never a remote's config
    remote: RemoteState  # updated by each push
    # The worker's environment read at its start (`WorkerEnvironment.variables`) that its
    # git commands on this tree take `PASSED_ENV` from; None: this process's (`git_env`).
    base_env: Mapping[str, str] | None = field(default=None, compare=False, repr=False)


def fence_ref(branch: str) -> str:
    """The ref that says which run may push `branch` (not a branch: no pull request,
    not fetched by a clone)."""
    return FENCE_PREFIX + branch


def git_dir_of(folder: Path) -> Path:
    return folder / "git"


def _origin(url: str) -> str | None:
    """`scheme://host[:port]/` of an http(s) URL: the only place the token header goes."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}/"


def _auth_env(token: str | None, url: str | None) -> dict[str, str]:
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    origin = _origin(url) if url else None
    if token and origin:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": f"http.{origin}.extraHeader",
                "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
            }
        )
    return env


def git_env(
    token: str | None = None, url: str | None = None, base_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a worker git command: minimal, no config from outside. Its
    `PASSED_ENV` come from `base_env`, the worker's environment read at its start (a job's
    commands: `Worktree.base_env`, `LifecycleContext.environment`); this process's only for
    a caller with no worker (the chat's checkouts, tests)."""
    base = os.environ if base_env is None else base_env
    return {
        **{k: base[k] for k in PASSED_ENV if k in base},
        "GIT_AUTHOR_NAME": BOT_NAME,
        "GIT_AUTHOR_EMAIL": BOT_EMAIL,
        "GIT_COMMITTER_NAME": BOT_NAME,
        "GIT_COMMITTER_EMAIL": BOT_EMAIL,
        **_auth_env(token, url),
    }


async def git(
    cwd: Path,
    *args: str,
    token: str | None = None,
    url: str | None = None,
    check: bool = True,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    stdin: bytes | None = None,
    base_env: Mapping[str, str] | None = None,
) -> str:
    """Run git (given `stdin`, if any); the token (if any) is sent only to `url`'s origin.
    `base_env`: the environment git's few variables come from (`git_env`)."""
    location: list[str] = []
    if git_dir is not None:
        location += [f"--git-dir={git_dir}"]
    if work_tree is not None:
        location += [f"--work-tree={work_tree}"]
    process = await asyncio.create_subprocess_exec(
        "git",
        *SAFE_OPTIONS,
        *location,
        *args,
        cwd=cwd,
        env=git_env(token, url, base_env),
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), GIT_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise WorktreeError(f"git {args[0]} timed out") from None
    if check and process.returncode != 0:
        complaint = err.decode(errors="replace").strip()
        raise WorktreeError(
            f"git {args[0]} failed: {_explain(complaint)}", transient=is_transient(complaint)
        )
    return out.decode(errors="replace").strip()


async def _reaching_remote(step: str, attempt: Callable[[], Awaitable[object]]) -> None:
    """`attempt` (a git step that reaches the remote), tried again after each transient
    failure while `REMOTE_RETRY_DELAYS` lasts; the last failure is raised."""
    for delay in (*REMOTE_RETRY_DELAYS, None):
        try:
            await attempt()
            return
        except WorktreeError as exc:
            if not exc.transient or delay is None:
                raise
            log.warning("git %s: %s; trying again in %.1f s", step, exc, delay)
        await asyncio.sleep(delay)


def _explain(complaint: str) -> str:
    """git's last word, said plainly where it misleads: on a 401 git wants to prompt for a
    user name, which a worker never may; after a failed request it says the remote hung
    up, the HTTP status it got being a line earlier."""
    lines = complaint.splitlines()
    last = lines[-1] if lines else ""
    if "could not read Username" in last:
        return f"the remote refused the token (HTTP 401; {last})"
    statuses = HTTP_STATUS.findall(complaint)
    if statuses and statuses[-1] not in last:
        return f"the remote answered HTTP {statuses[-1]} ({last})"
    return last or "no output"


def run_root(root: Path, task_id: int, run: str) -> Path:
    """A run's own folder: the clone (`repo/`) and the prompt file. One per run, so a run
    that lost its lease never removes the folder of the run that took it over."""
    return root / f"task-{task_id}-{run}"


def task_of(folder: Path) -> int | None:
    """The task id in a run folder's name (`task-<id>-<run>`), or None."""
    parts = folder.name.split("-")
    if len(parts) >= 3 and parts[0] == "task" and parts[1].isdigit():
        return int(parts[1])
    return None


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


async def tree_git(tree: Worktree, *args: str, check: bool = True) -> str:
    """A worker git command on the runtime's tree, with the worker's own git directory."""
    return await git(
        tree.path,
        *args,
        check=check,
        git_dir=tree.git_dir,
        work_tree=tree.path,
        base_env=tree.base_env,
    )


async def _fence_commit(
    cwd: Path, git_dir: Path, who: str, base_env: Mapping[str, str] | None
) -> str:
    """A new commit (empty tree, no parent) naming `who`, unique by its nonce."""
    # stdin is empty: the empty tree
    tree = await git(cwd, "mktree", git_dir=git_dir, base_env=base_env)
    message = f"steelframe fence: {who} {secrets.token_hex(8)}"
    return await git(cwd, "commit-tree", tree, "-m", message, git_dir=git_dir, base_env=base_env)


async def claim(
    folder: Path,
    *,
    url: str,
    token: str | None,
    branch: str,
    who: str,
    base_env: Mapping[str, str] | None = None,
) -> str:
    """Make this run the only one whose push of `branch` can succeed: point the branch's
    fence ref at a new commit of its own (forced: the caller holds the task's lease, so
    any earlier claim belongs to a run that lost it). Returns the claim's sha. Made before
    the clone, so whatever an earlier run pushed before the claim is what this run starts
    from, and nothing it pushes after the claim lands."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    git_dir = folder / "claim.git"
    await git(folder, "init", "--quiet", "--bare", str(git_dir), base_env=base_env)
    sha = await _fence_commit(folder, git_dir, who, base_env)
    refspec = f"{sha}:{fence_ref(branch)}"  # forced to one sha: a retry is harmless
    await _reaching_remote(
        "claim",
        lambda: git(
            folder,
            "push",
            "--quiet",
            "--force",
            url,
            refspec,
            token=token,
            url=url,
            git_dir=git_dir,
            base_env=base_env,
        ),
    )
    await asyncio.to_thread(remove, git_dir)
    return sha


# Long: one git sequence read top to bottom; most lines are git arguments, one per line.
async def prepare(
    folder: Path,
    *,
    clone_url: str,
    token: str | None,
    branch: str,
    fence: str = "",
    base_env: Mapping[str, str] | None = None,
) -> Worktree:
    """A fresh clone on `branch` (the remote's branch if a run pushed one, else the default
    branch): the worker's git directory in `folder/git`, the files in `folder/repo`.
    `fence`: this run's claim on the branch (`claim`), which its push requires. `base_env`:
    the worker's environment read at its start, for every git command on the tree."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    git_dir = git_dir_of(folder)
    path = folder / "repo"

    async def clone() -> None:
        await asyncio.to_thread(remove, git_dir)  # what a failed try left, if anything
        await git(
            folder,
            "clone",
            "--quiet",
            "--no-tags",
            "--bare",
            clone_url,
            str(git_dir),
            token=token,
            url=clone_url,
            base_env=base_env,
        )

    await _reaching_remote("clone", clone)
    # A bare clone maps the remote's branches onto local ones; copy them to origin/* (from
    # the clone itself, no second trip to the remote), so the base stays where it was.
    await git(
        folder,
        "fetch",
        "--quiet",
        "--no-tags",
        str(git_dir),
        "+refs/heads/*:refs/remotes/origin/*",
        git_dir=git_dir,
        base_env=base_env,
    )
    head = await git(
        folder, "symbolic-ref", "--short", "HEAD", check=False, git_dir=git_dir, base_env=base_env
    )
    base = head or "main"
    remote = await git(
        folder,
        "rev-parse",
        "--verify",
        "--quiet",
        f"origin/{branch}",
        check=False,
        git_dir=git_dir,
        base_env=base_env,
    )
    start = f"origin/{branch}" if remote else f"origin/{base}"
    await git(
        folder, "update-ref", f"refs/heads/{branch}", start, git_dir=git_dir, base_env=base_env
    )
    await git(
        folder, "symbolic-ref", "HEAD", f"refs/heads/{branch}", git_dir=git_dir, base_env=base_env
    )
    # The runtime's own repository: a local clone with no remote, sharing no config.
    await git(
        folder,
        "clone",
        "--quiet",
        "--no-tags",
        "--no-hardlinks",
        "--branch",
        branch,
        str(git_dir),
        path.name,
        base_env=base_env,
    )
    await git(path, "remote", "remove", "origin", base_env=base_env)
    await git(folder, "config", "core.bare", "false", git_dir=git_dir, base_env=base_env)
    tree = Worktree(
        path=path,
        branch=branch,
        base=base,
        resumed=bool(remote),
        git_dir=git_dir,
        url=clone_url,
        remote=RemoteState(branch_sha=remote, fence_sha=fence),
        base_env=base_env,
    )
    await tree_git(tree, "reset", "--quiet")
    return tree


def drop_embedded_repositories(top: Path) -> list[str]:
    """Remove every `.git` the runtime left below its tree's top (the top's own stays: the
    worker's git reads no config the runtime can write there). git looks into a repository
    it finds in the tree (`git add` runs `git status` inside each one), and that
    repository's own config (a clean filter) then ran as the worker, outside the sandbox:
    the qa-escape helper's runtime copied the App key out that way. The folders' files stay,
    committed as plain files. The folders that held one, relative to the top."""
    found = []
    for folder, dirs, files in os.walk(top):
        here = Path(folder)
        if ".git" in dirs:
            dirs.remove(".git")  # never walked into (followed, a symlink would lead out)
        elif ".git" not in files:
            continue
        if here == top:
            continue
        place = here / ".git"
        if place.is_dir() and not place.is_symlink():
            shutil.rmtree(place)
        else:
            place.unlink()  # a gitlink file ("gitdir: ..."), or a symlink to a repository
        found.append(str(here.relative_to(top)))
    return found


async def _stage_all(tree: Worktree) -> None:
    """`git add --all`, with no repository the runtime planted left for git to look into."""
    planted = await asyncio.to_thread(drop_embedded_repositories, tree.path)
    if planted:
        log.warning("removed the git repositories the runtime left in %s", ", ".join(planted))
    await tree_git(tree, "add", "--all")


async def commit_all(tree: Worktree, message: str) -> bool:
    """Commit whatever the runtime left in its tree; True if there was anything."""
    await _stage_all(tree)
    status = await tree_git(tree, "status", "--porcelain")
    if not status:
        return False
    await tree_git(tree, "commit", "--quiet", "--no-verify", "-m", message)
    return True


async def commits_ahead(tree: Worktree) -> int:
    count = await tree_git(tree, "rev-list", "--count", f"origin/{tree.base}..HEAD")
    return int(count or 0)


async def unpushed(tree: Worktree) -> bool:
    """True when HEAD holds work the remote's branch lacks: a commit other than the one
    the remote's branch holds (as this run cloned or last pushed it), ahead of the base.
    The run's commits are all the worker's (`commit_all`, the test command's check): the
    agent's own commits, in its repository, are only files to the worker."""
    head = await tree_git(tree, "rev-parse", "HEAD")
    return head != tree.remote.branch_sha and await commits_ahead(tree) > 0


async def changed_paths(tree: Worktree) -> list[str]:
    """Paths that differ from the base branch, committed or not (stages the changes)."""
    await _stage_all(tree)
    out = await tree_git(tree, "diff", "--cached", "--name-only", f"origin/{tree.base}")
    return [line for line in out.splitlines() if line]


async def push(tree: Worktree, *, token: str | None, who: str) -> None:
    """Push the branch to the clone URL (not a remote the runtime could have rewritten),
    fenced: one atomic push moves the fence ref to a new commit of this run's and the
    branch to HEAD, and the remote applies it only if the fence ref still holds this run's
    claim and the branch still holds what this run cloned (or last pushed). Otherwise
    nothing moves and this raises: another run claimed the branch (this one lost its
    lease), or someone pushed to it meanwhile. The branch may be rewritten (forced within
    that check): it is Steelframe's own and a retry may have rewritten it."""
    known = tree.remote
    fence = fence_ref(tree.branch)
    next_fence = await _fence_commit(tree.path, tree.git_dir, who, tree.base_env)
    head = await tree_git(tree, "rev-parse", "HEAD")
    wanted = {fence: next_fence, f"refs/heads/{tree.branch}": head}
    tried = False

    async def attempt() -> None:
        nonlocal tried
        try:
            await git(
                tree.path,
                "push",
                "--quiet",
                "--atomic",
                f"--force-with-lease={fence}:{known.fence_sha}",
                f"--force-with-lease=refs/heads/{tree.branch}:{known.branch_sha}",
                tree.url,
                *(f"{sha}:{ref}" for ref, sha in wanted.items()),
                token=token,
                url=tree.url,
                git_dir=tree.git_dir,
                base_env=tree.base_env,
            )
        except WorktreeError as exc:
            # An earlier try may have landed with its answer lost (this one then finds the
            # leases moved), or this one may have: the remote says which.
            if (exc.transient or tried) and await _remote_holds(tree, token, wanted):
                return
            tried = True
            raise

    await _reaching_remote("push", attempt)
    known.branch_sha, known.fence_sha = head, next_fence


async def release(
    folder: Path, claim: Claim, *, token: str | None, base_env: Mapping[str, str] | None = None
) -> None:
    """Remove a run's claim on its branch once it will push nothing more, if the fence ref
    still holds it (a run that claimed since keeps its own). From a git directory of its
    own in `folder`, so a run whose clone never happened releases its claim too. The task's
    next run claims the branch again, and a stale run's push finds no claim to move."""
    fence = fence_ref(claim.branch)
    git_dir = folder / "release.git"
    await git(folder, "init", "--quiet", "--bare", str(git_dir), base_env=base_env)
    try:
        await _reaching_remote(
            "release",
            lambda: git(
                folder,
                "push",
                "--quiet",
                f"--force-with-lease={fence}:{claim.remote.fence_sha}",
                claim.url,
                f":{fence}",
                token=token,
                url=claim.url,
                git_dir=git_dir,
            ),
        )
    finally:
        await asyncio.to_thread(remove, git_dir)


async def _remote_holds(tree: Worktree, token: str | None, wanted: dict[str, str]) -> bool:
    """True if the remote's refs are at `wanted` ({ref: sha}); False if not or unknown."""
    try:
        listed = await git(
            tree.path,
            "ls-remote",
            tree.url,
            *wanted,
            token=token,
            url=tree.url,
            git_dir=tree.git_dir,
            base_env=tree.base_env,
        )
    except WorktreeError:
        return False
    held: dict[str, str] = {}
    for line in listed.splitlines():  # "<sha>\t<ref>"
        sha, _, ref = line.partition("\t")
        held[ref] = sha
    return all(held.get(ref) == sha for ref, sha in wanted.items())
