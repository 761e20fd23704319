"""Git plumbing for tests: a branch with one commit in a sandbox repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from github_sandbox.git import SANDBOX_AUTHOR


def branch_with_commit(git_path: object, branch: str) -> None:
    path = Path(str(git_path))
    env = {**SANDBOX_AUTHOR}

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["git", "-C", str(path), *args],
            input=stdin,
            text=True,
            capture_output=True,
            check=True,
            env={**os.environ, **env},
        )
        return done.stdout.strip()

    blob = run("hash-object", "-w", "--stdin", stdin="change\n")
    tree = run("mktree", stdin=f"100644 blob {blob}\tchange.txt\n")
    commit = run("commit-tree", tree, "-p", "refs/heads/main", "-m", "change")
    run("update-ref", f"refs/heads/{branch}", commit)
