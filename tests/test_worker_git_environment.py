"""A job's git commands (claim, clone, commit, push, release: `bot.lifecycle.worktree`) take
the few variables they pass on (`worktree.PASSED_ENV`: PATH, HOME, the locale, proxies) from
the worker's environment read at its start (`LifecycleContext.environment`, carried by the
`Worktree`), as setup and the coding run do (tests/test_coding_environment.py): a variable
changed in the worker's process after its start does not reach them. `git_env` once read
`os.environ` again on every git command of a job."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

INTRUDER = "set after the worker started"


def _git_on_a_later_path(folder: Path, real_git: str) -> Path:
    """A folder holding a `git` that runs the real one as an author the job never named."""
    folder.mkdir()
    script = folder / "git"
    script.write_text(
        "#!/bin/sh\n"
        f'GIT_AUTHOR_NAME="{INTRUDER}" GIT_COMMITTER_NAME="{INTRUDER}" '
        f'exec {real_git} "$@"\n'
    )
    script.chmod(0o755)
    return folder


async def test_a_path_changed_after_the_worker_started_does_not_reach_the_jobs_git(
    make: Make, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_git = shutil.which("git")
    assert real_git is not None
    lc = await make(coding_command=command("commit"))
    later = _git_on_a_later_path(tmp_path / "later-bin", real_git)
    # The process's PATH, after the worker's start: a git found there would name the commit.
    monkeypatch.setenv("PATH", f"{later}{os.pathsep}{os.environ['PATH']}")
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == "delivered", task.last_error
    assert task.branch
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    log = await asyncio.to_thread(
        subprocess.run,
        [real_git, "-C", str(git_path), "log", "-1", "--format=%an|%cn", task.branch],
        capture_output=True,
        text=True,
        check=True,
    )
    names = log.stdout.strip()
    assert names == "steelframe[bot]|steelframe[bot]"
