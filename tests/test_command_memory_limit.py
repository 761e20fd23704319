"""A setup or test command that the run's memory limit stops says so (its `CommandResult`
records the limit; its event line, setup's log, the task's error and the pull request's
body word it), where a command that fails of itself is a plain failed exit. Real
bubblewrap, a real cgroup per run (skipped with the reason where the host has none).

The run's memory limit is also each process's RLIMIT_DATA (prlimit), so one process that
allocates past it fails with MemoryError before the cgroup matters; the cgroup's limit is
the one that stops several processes that together exceed it, as here."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import msgspec
import pytest

from bot.lifecycle import repo_tests, run_cgroup
from bot.lifecycle.models import TaskLog
from bot.lifecycle.redact import Redactor
from bot.lifecycle.sandbox import Network, SandboxPolicy, SandboxRun
from bot.lifecycle.setup_process import CommandResult, run_command
from bot.lifecycle.setup_run import ended, setup_failure
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap
from tui_client import tasks_wire

MEMORY_MB = 64
# A whole run (the agent's runtime too, a Python process under the same RLIMIT_DATA).
RUN_MEMORY_MB = 256


def stopped(limit_mb: int) -> str:
    return (
        f"stopped: it reached the run's memory limit ({limit_mb} MB; STEELFRAME_CODING_MEMORY_MB)"
    )


def greedy(limit_mb: int) -> str:
    """Three children of half the limit each: each under its RLIMIT_DATA, together over."""
    held = f"bytearray({limit_mb // 2} << 20)"
    return (
        f"for n in 1 2 3; do {sys.executable} -c "
        f"'import time; held = {held}; time.sleep(60)' & done; wait; exit 0"
    )


STOPPED, GREEDY = stopped(MEMORY_MB), greedy(MEMORY_MB)


@pytest.fixture(autouse=True)
def sandbox_with_cgroups() -> None:
    require_bwrap()
    found = run_cgroup.status()
    if not found.per_run:
        pytest.skip(f"no cgroup per run on this host: {found.detail}")


def policy() -> SandboxPolicy:
    return SandboxPolicy(
        network=Network.OFF,
        memory_mb=MEMORY_MB,
        max_processes=32,
        read_only=(Path(sys.prefix), Path(sys.base_prefix)),  # the interpreter GREEDY runs
    )


def place(tmp_path: Path) -> SandboxRun:
    folder = tmp_path / "run"
    (folder / "repo").mkdir(parents=True)
    return SandboxRun(repo=folder / "repo", tmp=folder / "tmp", prompt=folder / "prompt.md")


async def test_a_command_over_the_runs_memory_is_stopped_by_it_and_says_so(
    tmp_path: Path,
) -> None:
    result = await run_command(policy(), place(tmp_path), GREEDY, {}, time_limit=60)
    assert result.memory_limit_mb == MEMORY_MB, result
    assert not result.passed and not result.timed_out
    assert setup_failure(result, 1, 2) == f"setup command 1 of 2 {STOPPED}"
    assert ended(result).startswith(f"{STOPPED}, ")
    line = repo_tests.tests_line(result, Redactor())
    assert line.startswith("Tests: `") and f"` {STOPPED} after " in line
    assert f"`{GREEDY}` {STOPPED}." in repo_tests.fix_prompt("Do it.", result, Redactor())


async def test_a_command_that_fails_of_itself_is_a_failed_exit(tmp_path: Path) -> None:
    allocates = f"{sys.executable} -c 'held = bytearray(16 << 20)'; echo broken; exit 3"
    result = await run_command(policy(), place(tmp_path), allocates, {}, time_limit=60)
    assert result.exit_code == 3 and result.memory_limit_mb is None, result
    assert setup_failure(result, 1, 1) == "setup command 1 of 1 failed (exit 3)"
    assert ended(result).startswith("exit 3, ")
    assert "memory" not in repo_tests.tests_line(result, Redactor())


def test_a_command_that_exits_0_after_the_limit_killed_a_part_of_it_did_not_pass() -> None:
    # `pip install ... || true`: the kill was the run's limit, whatever the shell said.
    result = CommandResult("x || true", 0, 1.0, "", memory_limit_mb=MEMORY_MB)
    assert not result.passed
    assert repo_tests.tests_line(result, Redactor()).startswith(f"Tests: `x || true` {STOPPED}")


async def _bench(make: Make, tmp_path: Path, config: str) -> tuple[Lifecycle, Path]:
    report = exchange_dir(tmp_path) / "report.json"
    lc = await make(
        coding_command=command("envcheck", report, "sfmemory-"),
        coding_memory_mb=RUN_MEMORY_MB,
        task_max_attempts=2,  # a setup the limit stopped is not attempted again
    )
    commit_files(
        lc.sandbox.sandbox.world.repo(lc.repo).git_path, {".steelframe/config.yml": config}
    )
    return lc, report


async def test_a_setup_the_memory_limit_stopped_fails_the_task_saying_so(
    make: Make, tmp_path: Path
) -> None:
    lc, report = await _bench(make, tmp_path, f"setup:\n  - {json.dumps(greedy(RUN_MEMORY_MB))}\n")
    issue = await lc.open_issue("Greedy setup")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED and task.attempts == 1 and not report.exists()
    assert (
        task.last_error is not None
        and f"setup command 1 of 1 {stopped(RUN_MEMORY_MB)}" in task.last_error
    )
    rows = lc.ctx.db.call(lambda s: s.query(TaskLog).filter(TaskLog.task_id == task.id).all())
    assert f"[setup] {stopped(RUN_MEMORY_MB)}, " in "\n".join(row.text for row in rows)
    public = "\n".join(c["body"] for c in await lc.comments(issue))
    assert f"setup command 1 of 1 {stopped(RUN_MEMORY_MB)}" in public


async def test_tests_the_memory_limit_stopped_say_so_in_the_pull_request(
    make: Make, tmp_path: Path
) -> None:
    lc, _ = await _bench(make, tmp_path, f"test: {json.dumps(greedy(RUN_MEMORY_MB))}\n")
    issue = await lc.open_issue("Greedy tests")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED, lc.task(issue).last_error
    [pull] = await lc.pulls()
    assert f"{stopped(RUN_MEMORY_MB)} after " in pull["body"] and pull["draft"] is True
    # The tests' event says it too, as data a client reads (the TUI's copy of the task JSON).
    response = await lc.api.get(f"/api/operator/tasks/{lc.task(issue).id}")
    detail = msgspec.json.decode(await response.read(), type=tasks_wire.TaskDetail)
    runs = [e.data for e in detail.events if e.data and "tail" in e.data]
    assert runs and runs[-1]["memory_limit_mb"] == RUN_MEMORY_MB  # the one the body words


async def test_a_commands_end_does_not_wait_for_another_runs_group() -> None:
    """A setup command reads its own group's verdict; a coding run beside it goes on."""
    groups = [run_cgroup.RunCgroup.make(MEMORY_MB, 8) for _ in range(2)]
    processes = [
        await asyncio.create_subprocess_exec(*group.joining(["sleep", seconds]))
        for group, seconds in zip(groups, ("120", "0"), strict=True)
    ]
    for group, process in zip(groups, processes, strict=True):
        group.watch(process)
    try:
        await groups[1].ended()
        assert processes[1].returncode == 0 and processes[0].returncode is None
        assert not groups[1].memory_exhausted
    finally:
        processes[0].kill()
        await groups[0].ended()
    assert not any(group.exists() for group in groups[0].directories + groups[1].directories)
