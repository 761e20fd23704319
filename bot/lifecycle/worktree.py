"""An isolated clone of the task's repository under `data_dir/worktrees`, and its branch.

Cloned and pushed with the installation token passed through the environment as an HTTP
header (`GIT_CONFIG_*`), so it is never written into `.git/config` where the coding
runtime could read it. The worker's own git commands disable hooks and fsmonitor: the
runtime could have planted either in the clone to run code while the token is present.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

GIT_TIMEOUT_SECONDS = 300.0
BOT_NAME = "steelframe[bot]"
BOT_EMAIL = "steelframe-bot@users.noreply.github.com"
SAFE_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class WorktreeError(Exception):
    """A git step failed; the message names the step and git's own complaint."""


@dataclass(frozen=True)
class Worktree:
    path: Path
    branch: str
    base: str
    resumed: bool  # the branch already existed on the remote (a continuation)


def _auth_env(token: str | None) -> dict[str, str]:
    env = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env.update(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
            }
        )
    return env


async def git(cwd: Path, *args: str, token: str | None = None, check: bool = True) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")},
        "GIT_AUTHOR_NAME": BOT_NAME,
        "GIT_AUTHOR_EMAIL": BOT_EMAIL,
        "GIT_COMMITTER_NAME": BOT_NAME,
        "GIT_COMMITTER_EMAIL": BOT_EMAIL,
        **_auth_env(token),
    }
    process = await asyncio.create_subprocess_exec(
        "git",
        *SAFE_OPTIONS,
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), GIT_TIMEOUT_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise WorktreeError(f"git {args[0]} timed out") from None
    if check and process.returncode != 0:
        message = err.decode(errors="replace").strip().splitlines()
        raise WorktreeError(f"git {args[0]} failed: {message[-1] if message else 'no output'}")
    return out.decode(errors="replace").strip()


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


async def prepare(folder: Path, *, clone_url: str, token: str | None, branch: str) -> Worktree:
    """A fresh clone in `folder/repo` on `branch`: the remote's branch if a run pushed
    one, else the default branch."""
    await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
    path = folder / "repo"
    await git(folder, "clone", "--quiet", "--no-tags", clone_url, path.name, token=token)
    head = await git(path, "symbolic-ref", "--short", "refs/remotes/origin/HEAD", check=False)
    base = head.removeprefix("origin/") if head else "main"
    remote = await git(path, "rev-parse", "--verify", "--quiet", f"origin/{branch}", check=False)
    start = f"origin/{branch}" if remote else f"origin/{base}"
    await git(path, "checkout", "--quiet", "-B", branch, start)
    return Worktree(path=path, branch=branch, base=base, resumed=bool(remote))


async def commit_all(tree: Worktree, message: str) -> bool:
    """Commit whatever the runtime left uncommitted; True if there was anything."""
    await git(tree.path, "add", "--all")
    status = await git(tree.path, "status", "--porcelain")
    if not status:
        return False
    await git(tree.path, "commit", "--quiet", "--no-verify", "-m", message)
    return True


async def commits_ahead(tree: Worktree) -> int:
    count = await git(tree.path, "rev-list", "--count", f"origin/{tree.base}..HEAD")
    return int(count or 0)


async def changed_paths(tree: Worktree) -> list[str]:
    """Paths that differ from the base branch, committed or not (stages the changes)."""
    await git(tree.path, "add", "--all")
    out = await git(tree.path, "diff", "--cached", "--name-only", f"origin/{tree.base}")
    return [line for line in out.splitlines() if line]


async def push(tree: Worktree, *, token: str | None) -> None:
    """Push the branch; forced, because the branch is Steelframe's own and a retry may
    have rewritten it."""
    await git(
        tree.path,
        "push",
        "--quiet",
        "--force",
        "origin",
        f"HEAD:refs/heads/{tree.branch}",
        token=token,
    )
