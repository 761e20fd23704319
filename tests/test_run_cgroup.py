"""A coding run's memory and process limits hold for the whole run (a cgroup per run,
`bot.lifecycle.run_cgroup`): children that together exceed the run's memory stop the run,
and nothing the run started outlives it (issue 35)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from bot.lifecycle.coding import CodingOutcome, CodingRequest, CodingStatus, run_coding
from bot.lifecycle.run_cgroup import RunCgroup, status
from bot.lifecycle.sandbox import SandboxPolicy, SandboxRun
from tests.fakes.lifecycle import PATIENCE_SECONDS, gone

# Three children of 90 MB each: under the per-process limit (128 MB of data), over the
# run's 128 MB together. Each says it holds its memory, then waits to be killed.
GREEDY = r"""
import json, os, sys, time
for n in range(3):
    if os.fork() == 0:
        open(f"started-{n}", "w").write(str(os.getpid()))
        held = bytearray(b"x") * (90 * 1024 * 1024)
        open(f"held-{n}", "w").write(str(os.getpid()))
        time.sleep(60)
        os._exit(0)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
print(json.dumps({"type": "result", "status": "done", "summary": "all held"}))
"""

# A daemon that leaves the run's process group and would outlive it.
DAEMON = r"""
import json, subprocess, sys
child = subprocess.Popen(["sleep", "120"], start_new_session=True)
open("daemon", "w").write(str(child.pid))
print(json.dumps({"type": "result", "status": "done", "summary": "left a daemon"}))
"""


@pytest.fixture(autouse=True)
def cgroups() -> None:
    found = status()
    if not found.per_run:
        if os.environ.get("CI"):
            pytest.fail(f"CI must allow a cgroup per run: {found.detail}")
        pytest.skip(f"no cgroup per run on this host: {found.detail}")


async def run(
    tmp_path: Path, script: str, *, memory_mb: int = 128, started: list[int] | None = None
) -> tuple[CodingOutcome, Path]:
    repo, folder = tmp_path / "run" / "repo", tmp_path / "run"
    repo.mkdir(parents=True)

    async def nothing(*args: object) -> None:
        return None

    async def launched(pid: int) -> None:
        if started is not None:
            started.append(pid)

    outcome = await run_coding(
        CodingRequest(
            command=[sys.executable, "-c", script],
            run=SandboxRun(repo=repo, tmp=folder / "tmp", prompt=folder / "prompt.md"),
            prompt="the prompt",
            time_limit=60,
            task_env={},
            # Off: the children's pids are the host's, for the test to look at.
            policy=SandboxPolicy(enabled=False, memory_mb=memory_mb, max_processes=64),
        ),
        stop=asyncio.Event(),
        on_start=launched,
        on_session=nothing,
        on_usage=lambda tokens, cost: None,
    )
    return outcome, repo


def run_groups() -> list[Path]:
    """The run groups that exist now, in every hierarchy."""
    found = []
    for base in Path("/sys/fs/cgroup").rglob("steelframe-runs"):
        found += [path for path in base.iterdir() if path.is_dir()]
    return found


async def test_a_run_whose_children_together_exceed_its_memory_is_stopped(tmp_path: Path) -> None:
    began = time.monotonic()
    runtime: list[int] = []
    outcome, repo = await run(tmp_path, GREEDY, started=runtime)
    assert outcome.status == CodingStatus.ERROR, outcome.log.text()
    assert outcome.error is not None and "over its memory limit" in outcome.error
    assert time.monotonic() - began < 30  # stopped, not left to its 60 s sleeps
    assert len(list(repo.glob("held-*"))) < 3  # the third never got its memory
    children = [int(path.read_text()) for path in repo.glob("started-*")]
    # Before the children's own 60 s sleeps end (they began after `began`, under 30 s ago).
    assert await gone(*runtime, *children, within=20)


async def test_nothing_a_run_started_outlives_it(tmp_path: Path) -> None:
    before = set(run_groups())
    outcome, repo = await run(tmp_path, DAEMON, memory_mb=256)
    assert outcome.status == CodingStatus.DONE, outcome.log.text()
    assert await gone(int((repo / "daemon").read_text()))  # before its own 120 s sleep ends

    async def removed() -> bool:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while set(run_groups()) - before:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    assert await removed(), "the run's group was left behind"


def test_the_status_says_what_limits_apply_to(tmp_path: Path) -> None:
    here = status()
    assert here.per_run and here.mechanism in ("cgroup v1", "cgroup v2")
    nowhere = status(root=tmp_path / "no-cgroupfs")
    assert not nowhere.per_run and nowhere.mechanism == "prlimit"
    assert "each process of a run" in nowhere.detail
    group = RunCgroup.make(64, 16)
    group.remove()
