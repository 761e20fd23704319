"""A sandboxed run's process limit is decided when that run starts: its cgroup's `pids.max`
where the run got a group of its own, else RLIMIT_NPROC (prlimit's `--nproc`). A host that
allowed the readiness probe's group may refuse a later run's (the cgroup root pointed at a
path nothing can be made under, here); that run still has a process limit. Real
bubblewrap, real cgroups where the host allows them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config_values import DEFAULT_UID_RANGE
from bot.lifecycle import run_cgroup, sandbox_uid
from bot.lifecycle.coding import CodingOutcome, CodingRequest, CodingStatus, run_coding
from bot.lifecycle.sandbox import Network, SandboxPolicy, SandboxRun
from bot.lifecycle.setup_process import run_command
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.sandbox import exchange_dir, own_uids, require_bwrap, require_root

MAX_PROCESSES = 16
# Reports its RLIMIT_NPROC, then starts children until the run's limit refuses one.
FORKS = r"""
import json, os, resource, subprocess
seen = {"nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0], "uid": os.getuid()}
children = []
try:
    for _ in range(40):
        children.append(subprocess.Popen(["sleep", "30"]))
except OSError:
    pass
seen["forks"] = len(children)
for child in children:
    child.kill()
print(json.dumps({"type": "result", "status": "done", "summary": json.dumps(seen)}))
"""


@pytest.fixture(autouse=True)
def bwrap() -> None:
    require_bwrap()


@pytest.fixture
def refused_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return refuse_cgroups(tmp_path / "cgroup", monkeypatch)


def refuse_cgroups(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Runs' groups are made under `root` from now on, a cgroup root (v2 by its look) under
    which none can be: where this process's own group is, `steelframe-runs` is a file.

    Such a run's limit is RLIMIT_NPROC, which counts every process of its uid: as root each
    run has a uid of its own (`bot.lifecycle.sandbox_uid`), so the suite's other sandboxed
    runs (other xdist processes) do not count against this run's 16."""
    root.mkdir()
    (root / "cgroup.controllers").write_text("memory pids\n")
    own = root
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            own = root / line[3:].lstrip("/")
    own.mkdir(parents=True, exist_ok=True)
    (own / "cgroup.procs").write_text("")
    (own / run_cgroup.RUNS).write_text("not a folder\n")
    monkeypatch.setattr(run_cgroup, "CGROUP_ROOT", root)
    return root


def policy(**changes: Any) -> SandboxPolicy:
    limited = SandboxPolicy(
        network=Network.OFF,
        memory_mb=512,
        max_processes=MAX_PROCESSES,
        read_only=(Path(sys.prefix), Path(sys.base_prefix)),  # the interpreter FORKS runs on
    )
    return dataclasses.replace(limited, **changes)


def sandbox_run(tmp_path: Path) -> SandboxRun:
    folder = tmp_path / "run"
    (folder / "repo").mkdir(parents=True)
    return SandboxRun(repo=folder / "repo", tmp=folder / "tmp", prompt=folder / "prompt.md")


async def coding(
    tmp_path: Path,
    script: str,
    limits: SandboxPolicy,
    *args: str,
    stop: asyncio.Event | None = None,
) -> CodingOutcome:
    """A coding run of `script`; `stop`, if given, is set as soon as it started."""
    stopping = asyncio.Event() if stop is None else stop

    async def started(pid: int) -> None:
        if stop is not None:
            stop.set()

    async def nothing(*args: object) -> None:
        return None

    return await run_coding(
        CodingRequest(
            command=[sys.executable, "-c", script, *args],
            run=sandbox_run(tmp_path),
            prompt="the prompt",
            time_limit=60,
            task_env={},
            policy=limits,
        ),
        stop=stopping,
        on_start=started,
        on_session=nothing,
        on_usage=lambda tokens, cost: None,
    )


async def forks_seen(tmp_path: Path, limits: SandboxPolicy | None = None) -> dict[str, Any]:
    outcome = await coding(tmp_path, FORKS, limits or policy())
    assert outcome.status == CodingStatus.DONE, outcome.log.text()
    seen: dict[str, Any] = json.loads(outcome.summary)
    seen["log"] = outcome.log.text()
    return seen


async def test_a_run_refused_a_cgroup_after_the_probe_allowed_one_has_a_process_limit(
    tmp_path: Path, refused_root: Path
) -> None:
    # Whatever the host's answer was when the worker asked (`run_cgroup.status()`, for
    # /readyz and `doctor`), this run's own group is refused.
    seen = await forks_seen(tmp_path)
    assert seen["nproc"] == MAX_PROCESSES
    assert seen["forks"] < MAX_PROCESSES
    assert not await asyncio.to_thread(lambda: list(refused_root.rglob("run-*")))


async def test_a_run_in_its_own_cgroup_is_limited_by_it_not_by_its_uid(tmp_path: Path) -> None:
    if not run_cgroup.status().per_run:
        pytest.skip(f"no cgroup per run on this host: {run_cgroup.status().detail}")
    seen = await forks_seen(tmp_path)
    # RLIMIT_NPROC would count every run's processes (all are one uid): not set, the
    # worker's own stays; the group's pids.max stops the run.
    assert seen["nproc"] == resource.getrlimit(resource.RLIMIT_NPROC)[0] != MAX_PROCESSES
    assert seen["forks"] < MAX_PROCESSES


async def test_a_setup_command_has_a_process_limit_with_or_without_its_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Setup and test commands start the same way: in a group of their own where the
    host allows it, with RLIMIT_NPROC where it refuses."""
    run = sandbox_run(tmp_path)
    limits = "grep 'Max processes' /proc/self/limits"
    in_group = await run_command(policy(), run, limits, {}, time_limit=60)
    assert in_group.passed, in_group.tail
    refuse_cgroups(tmp_path / "refused", monkeypatch)
    refused = await run_command(policy(), run, limits, {}, time_limit=60)
    assert refused.passed, refused.tail
    assert refused.tail.split()[2:4] == [str(MAX_PROCESSES)] * 2
    if run_cgroup.status().per_run:  # the real root's answer (its default, read at import)
        assert in_group.tail.split()[2] != str(MAX_PROCESSES)


@contextlib.contextmanager
def nobodys_processes(count: int) -> Iterator[None]:
    """`count` processes of nobody on the host for as long as the block runs (the
    reproduction of the failure: a run that shared nobody could not fork)."""
    setpriv = ["setpriv", f"--reuid={sandbox_uid.NOBODY}", f"--regid={sandbox_uid.NOBODY}"]
    sleepers = [
        subprocess.Popen([*setpriv, "--clear-groups", "sleep", "600"]) for _ in range(count)
    ]
    try:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while not all(real_uid(p.pid) == sandbox_uid.NOBODY for p in sleepers):
            assert time.monotonic() < deadline, "the sleepers did not become nobody"
            time.sleep(0.01)
        yield
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def real_uid(pid: int) -> int | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


async def test_nobodys_processes_do_not_count_against_a_run_of_its_own_uid(
    tmp_path: Path, refused_root: Path
) -> None:
    """No cgroup for the run, so RLIMIT_NPROC is its process limit: with a uid of its own
    the run gets every one of its 16 (itself and 15 children) whatever runs as nobody;
    sharing nobody (STEELFRAME_SANDBOX_UID_RANGE=off), its first fork fails."""
    require_root()
    with nobodys_processes(MAX_PROCESSES + 4):
        own = await forks_seen(tmp_path / "own")
        shared = await forks_seen(tmp_path / "shared", policy(uid_range=None))
    assert own["uid"] in DEFAULT_UID_RANGE and own["nproc"] == MAX_PROCESSES
    assert own["forks"] == MAX_PROCESSES - 1, own["log"]
    assert f"runs as uid {own['uid']}, its own" in own["log"]
    assert "RLIMIT_NPROC (16): the processes of its uid, this run's" in own["log"]
    assert shared["uid"] == sandbox_uid.NOBODY and shared["forks"] == 0
    assert "runs as nobody (65534), as every run: STEELFRAME_SANDBOX_UID_RANGE=off" in shared["log"]


# Writes its uid where the other run looks, and waits (a minute at most) for the other's.
MEET = r"""
import json, os, pathlib, sys, time
folder, me, other = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(folder / me).write_text(str(os.getuid()))
deadline = time.monotonic() + 60
while not (folder / other).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
seen = {"uid": os.getuid(), "met": (folder / other).exists()}
print(json.dumps({"type": "result", "status": "done", "summary": json.dumps(seen)}))
"""


async def test_two_runs_at_once_run_as_two_uids_of_the_range(tmp_path: Path) -> None:
    require_root()
    exchange = exchange_dir(tmp_path)
    limits = policy(uid_range=own_uids(2), writable=(exchange,))
    outcomes = await asyncio.gather(
        coding(tmp_path / "a", MEET, limits, str(exchange), "a", "b"),
        coding(tmp_path / "b", MEET, limits, str(exchange), "b", "a"),
    )
    seen = [json.loads(outcome.summary) for outcome in outcomes]
    assert all(each["met"] for each in seen), seen  # both ran at the same time
    assert sorted(each["uid"] for each in seen) == list(own_uids(2))


async def test_a_runs_uid_is_let_go_when_it_ends_or_is_killed(tmp_path: Path) -> None:
    """One uid in the range: the next run gets it only if the last one let it go (else it
    would be nobody)."""
    require_root()
    (uid,) = own_uids(1)
    limits = policy(uid_range=own_uids(1))
    first = await forks_seen(tmp_path / "first", limits)
    # Killed: stopped as soon as it started, its children with it.
    killed = await coding(tmp_path / "killed", FORKS, limits, stop=asyncio.Event())
    after = await forks_seen(tmp_path / "after", limits)
    assert killed.status == CodingStatus.STOPPED
    assert f"runs as uid {uid}, its own" in killed.log.text()
    assert first["uid"] == after["uid"] == uid
    assert uid not in sandbox_uid.running_uids()
