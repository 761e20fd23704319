"""A coding run's memory and process limits for the whole run: a cgroup per run.

`prlimit` limits each process of a run (`bot.lifecycle.sandbox`): three children of one run
held 1.8 GB each at once. Where the host lets the worker make cgroups, each run gets one of
its own with `STEELFRAME_CODING_MEMORY_MB` as the memory limit (swap included, where the
kernel accounts it) and `STEELFRAME_CODING_MAX_PROCESSES` as the process limit, for all of
its processes together. The launch joins it before anything runs: the command's argv is
prefixed by a shell that writes its own pid to the group and then execs it, so the sandbox
and every child start inside, and none escapes it (a cgroup is not something a process can
leave without the privilege to write to another's `cgroup.procs`).

When the run's memory runs out the kernel kills one process; the whole run is then stopped
(every process in the group killed), so a run never carries on without a part of itself.
When the launched process ends, whatever is left in the group (a daemon that left the
process group) is killed and the group removed.

cgroup v1 (a `memory` and a `pids` hierarchy) and v2 (unified, with `memory` and `pids`
delegated to the worker's cgroup) are used; anywhere else (no cgroupfs, read-only, not
delegated) runs keep the per-process limits only, and `status()` says so for `/readyz` and
`steelframe doctor`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

log = logging.getLogger("steelframe.lifecycle")
CGROUP_ROOT = Path("/sys/fs/cgroup")
RUNS = "steelframe-runs"
OOM_POLL_SECONDS = 0.2
# Joins the groups named before `--` (writing its own pid), then becomes the command, with
# the environment it was given (the shell's own PWD dropped: the runtime's is an allowlist).
_JOIN = (
    'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; unset PWD; exec "$@"'
)


@dataclass(frozen=True)
class RunLimitsStatus:
    """What a run's limits apply to on this host, for readiness and `doctor`."""

    per_run: bool  # True: one cgroup per run; False: per process only (prlimit)
    mechanism: str  # "cgroup v1", "cgroup v2" or "prlimit"
    detail: str


class RunCgroup:
    """One run's cgroup: made before the launch, joined by it, removed after it."""

    _watching: ClassVar[set[asyncio.Task[None]]] = set()  # keeps each run's watcher referenced

    def __init__(self, directories: list[Path], memory_events: Path | None) -> None:
        self.directories = directories
        self._memory_events = memory_events
        self._watcher: asyncio.Task[None] | None = None
        self.memory_exhausted = False

    @classmethod
    def make(cls, memory_mb: int, max_processes: int, *, root: Path = CGROUP_ROOT) -> RunCgroup:
        """A new group with the run's limits; OSError if the host does not allow it."""
        name = f"run-{uuid.uuid4().hex[:12]}"
        memory = memory_mb * 1024 * 1024
        if (root / "cgroup.controllers").exists():
            base = _runs(_own_v2(root))
            group = base / name
            _enable_v2(base)
            group.mkdir()
            try:
                _write(group / "memory.max", memory)
                _write(group / "memory.swap.max", 0, optional=True)
                _write(group / "pids.max", max_processes)
            except OSError:
                with contextlib.suppress(OSError):
                    group.rmdir()  # as v1 below: no half-limited group is left behind
                raise
            return cls([group], group / "memory.events")
        memory_group = _runs(_own_v1(root, "memory")) / name
        pids_group = _runs(_own_v1(root, "pids")) / name
        made: list[Path] = []
        try:
            for group in (memory_group, pids_group):
                group.mkdir()
                made.append(group)
            _write(memory_group / "memory.limit_in_bytes", memory)
            _write(memory_group / "memory.memsw.limit_in_bytes", memory, optional=True)
            _write(pids_group / "pids.max", max_processes)
        except OSError:
            for group in reversed(made):
                with contextlib.suppress(OSError):
                    group.rmdir()
            raise
        return cls(made, memory_group / "memory.oom_control")

    def joining(self, argv: list[str]) -> list[str]:
        """`argv`, started inside this group (joined before exec: nothing runs outside)."""
        procs = [str(group / "cgroup.procs") for group in self.directories]
        return ["/bin/sh", "-c", _JOIN, "sh", *procs, "--", *argv]

    def watch(self, process: asyncio.subprocess.Process) -> None:
        """Stop the whole run if its memory runs out; remove the group once it ended."""
        task = asyncio.get_running_loop().create_task(self._watch(process))
        self._watcher = task
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        try:
            while process.returncode is None:
                if not self.memory_exhausted and self._oom_kills() > 0:
                    self.memory_exhausted = True
                    log.warning("run %s: memory limit reached; stopping it", process.pid)
                    self.kill_all()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(process.wait(), OOM_POLL_SECONDS)
        finally:
            # A kill the poll did not see (the run ended of it first) still counts.
            self.memory_exhausted = self.memory_exhausted or self._oom_kills() > 0
            await asyncio.to_thread(self.remove)

    async def ended(self) -> None:
        """Until this group's watch is over: the group removed and `memory_exhausted` final.
        Only its own watch: other runs' (a coding run beside a setup command) go on."""
        if self._watcher is not None:
            await asyncio.wait({self._watcher})  # not cancelled with the caller

    def pids(self) -> set[int]:
        found: set[int] = set()
        for group in self.directories:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (group / "cgroup.procs").read_text().split())
        return found

    def kill_all(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Kill what is left (it outlived the launched process) and remove the group."""
        for _ in range(50):  # killed processes leave their group as they are reaped
            self.kill_all()
            try:
                for group in self.directories:
                    if group.exists():
                        group.rmdir()
                return
            except OSError:
                time.sleep(0.02)
        log.warning("coding run cgroup %s could not be removed", self.directories)

    def _oom_kills(self) -> int:
        if self._memory_events is None:
            return 0
        try:
            lines = self._memory_events.read_text().splitlines()
        except OSError:
            return 0
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0


def status(root: Path = CGROUP_ROOT) -> RunLimitsStatus:
    """Whether runs get a cgroup of their own here: tried for real (a group made, limited
    and removed), since only the kernel knows what this process may write."""
    try:
        group = RunCgroup.make(64, 16, root=root)
    except OSError as exc:
        return RunLimitsStatus(
            False,
            "prlimit",
            f"no cgroup per run ({exc.strerror or exc}: {getattr(exc, 'filename', '') or root}): "
            "memory and process limits apply to each process of a run, not to the run",
        )
    group.remove()
    mechanism = "cgroup v2" if (root / "cgroup.controllers").exists() else "cgroup v1"
    return RunLimitsStatus(True, mechanism, f"one {mechanism} group per run under {RUNS}")


def _own_v1(root: Path, controller: str) -> Path:
    """The hierarchy's directory of this process's own group (nested groups count against
    the limits the host put on it)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return root / controller / path.lstrip("/")
    raise FileNotFoundError(2, f"no {controller} cgroup hierarchy", str(root / controller))


def _own_v2(root: Path) -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return root / line[3:].lstrip("/")
    raise FileNotFoundError(2, "no unified cgroup hierarchy", str(root))


def _runs(own: Path) -> Path:
    """Where this process's runs' groups go, in a hierarchy: under its own group, which
    must be a cgroup (not a folder that happens to be at the path)."""
    if not (own / "cgroup.procs").is_file():
        raise FileNotFoundError(2, "not a cgroup", str(own))
    base = own / RUNS
    base.mkdir(exist_ok=True)
    return base


def _enable_v2(base: Path) -> None:
    """Runs' groups sit under `base`, whose own subtree delegates memory and pids."""
    _write(base / "cgroup.subtree_control", "+memory +pids")


def _write(path: Path, value: object, *, optional: bool = False) -> None:
    try:
        path.write_text(str(value))
    except FileNotFoundError:
        if not optional:
            raise
