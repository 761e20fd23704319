"""Bare git repositories on disk behind the sandbox's repositories (clone, push, branches)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SANDBOX_AUTHOR = {
    "GIT_AUTHOR_NAME": "Steelframe Sandbox",
    "GIT_AUTHOR_EMAIL": "sandbox@steelframe.invalid",
    "GIT_COMMITTER_NAME": "Steelframe Sandbox",
    "GIT_COMMITTER_EMAIL": "sandbox@steelframe.invalid",
}


def _git(path: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, **SANDBOX_AUTHOR, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", "-C", str(path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed in {path}: {result.stderr.strip()}")
    return result.stdout.strip()


def init_bare(path: Path, *, branch: str, readme: str) -> str:
    """A bare repository at `path` whose `branch` holds one commit with README.md.

    Built with plumbing commands, so no working tree or user git config is needed.
    Returns the commit sha. An existing repository is left as it is."""
    if (path / "HEAD").exists():
        return branch_sha(path, branch) or ""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "--quiet", "--bare", f"--initial-branch={branch}")
    blob = _git(path, "hash-object", "-w", "--stdin", stdin=readme)
    tree = _git(path, "mktree", stdin=f"100644 blob {blob}\tREADME.md\n")
    commit = _git(path, "commit-tree", tree, "-m", "Initial commit")
    _git(path, "update-ref", f"refs/heads/{branch}", commit)
    # Pushes (git_http, or file:// through the control API) need no hooks; allow pushing
    # to the checked-out branch name.
    _git(path, "config", "receive.denyCurrentBranch", "ignore")
    return commit


def branch_sha(path: Path, branch: str) -> str | None:
    try:
        return _git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    except RuntimeError:
        return None


def fast_forward(path: Path, branch: str, sha: str) -> bool:
    """Move `branch` to `sha` when that is a fast-forward (a merge in the sandbox)."""
    current = branch_sha(path, branch)
    if current is None:
        return False
    try:
        _git(path, "merge-base", "--is-ancestor", current, sha)
    except RuntimeError:
        return False
    _git(path, "update-ref", f"refs/heads/{branch}", sha, current)
    return True
