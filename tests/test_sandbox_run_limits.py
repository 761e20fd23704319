"""A sandboxed run's process limit is decided when that run starts: its cgroup's `pids.max`
where the run got a group of its own, else RLIMIT_NPROC (prlimit's `--nproc`). A host that
allowed the readiness probe's group may refuse a later run's (the cgroup root pointed at a
path nothing can be made under, here); that run still has a process limit. Real
bubblewrap, real cgroups where the host allows them."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
from pathlib import Path

import pytest

from bot.lifecycle import run_cgroup, sandbox
from bot.lifecycle.coding import CodingRequest, CodingStatus, run_coding
from bot.lifecycle.sandbox import Network, SandboxPolicy, SandboxRun
from bot.lifecycle.setup_process import run_command
from tests.fakes.sandbox import require_bwrap

MAX_PROCESSES = 16
# Reports its RLIMIT_NPROC, then starts children until the run's limit refuses one.
FORKS = r"""
import json, resource, subprocess
seen = {"nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0]}
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

    Such a run's limit is RLIMIT_NPROC, which counts every process of its uid: as root the
    runtime is `nobody`, which the suite's other sandboxed runs (other xdist processes) are
    too, and their processes would count against this run's 16 ("Cannot fork" before the
    first command). So these runs get a uid of their own, one per test process."""
    monkeypatch.setattr(sandbox, "UNPRIVILEGED_ID", 61000 + os.getpid() % 4000)
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


def policy() -> SandboxPolicy:
    return SandboxPolicy(
        network=Network.OFF,
        memory_mb=512,
        max_processes=MAX_PROCESSES,
        read_only=(Path(sys.prefix), Path(sys.base_prefix)),  # the interpreter FORKS runs on
    )


def sandbox_run(tmp_path: Path) -> SandboxRun:
    folder = tmp_path / "run"
    (folder / "repo").mkdir(parents=True)
    return SandboxRun(repo=folder / "repo", tmp=folder / "tmp", prompt=folder / "prompt.md")


async def forks_seen(tmp_path: Path) -> dict[str, int]:
    async def nothing(*args: object) -> None:
        return None

    outcome = await run_coding(
        CodingRequest(
            command=[sys.executable, "-c", FORKS],
            run=sandbox_run(tmp_path),
            prompt="the prompt",
            time_limit=60,
            task_env={},
            policy=policy(),
        ),
        stop=asyncio.Event(),
        on_start=nothing,
        on_session=nothing,
        on_usage=lambda tokens, cost: None,
    )
    assert outcome.status == CodingStatus.DONE, outcome.log.text()
    seen: dict[str, int] = json.loads(outcome.summary)
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
