"""Who a sandboxed run is on the host when the worker is root: a uid of its own from
STEELFRAME_SANDBOX_UID_RANGE, held by the run while it runs, else nobody (65534).

Why a uid per run: RLIMIT_NPROC counts every process of a uid, so on a host without a
cgroup per run, runs that all were `nobody` added up against one run's process limit (a
second run could not fork). With a uid of its own, a run's limit counts its own processes.

How it is held (`lease`): one file per uid in a runtime folder (`/run/steelframe/
sandbox-uids`), flock'd for as long as the run is alive. A worker that dies loses its locks
with its descriptors (the kernel releases them), so nothing is held by a dead run; a uid
that still has processes (a dead worker's run being killed) is passed over all the same.
Every worker on a host takes its uids from the same folder; workers in separate containers
need the folder shared, or ranges of their own. When the run ends (`UidLease.release`),
whatever still runs as its uid is killed before the lock goes: the uid is the run's alone.

A uid with no entry in the host's /etc/passwd gets one in a copy shown to the run as its
/etc/passwd (`UidLease.passwd`): git, Node's `os.userInfo()` and Python's `getpass` look
the running user up and fail without one. Its group stays nogroup (65534) for every run,
and it starts with umask 002 (`RUN_UMASK`), so an extra writable path
(STEELFRAME_CODING_WRITABLE_PATHS) that is group-writable for nogroup, and what earlier
runs left in it, stay writable whichever uid a run gets.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from bot.config_values import UidRange

NOBODY = 65534
RUN_GROUP = 65534  # nogroup: every run's gid, whichever uid it has
# What a run of its own uid creates is group-writable: a task's next run (or another run)
# has another uid and the same group, and must still write what this one left in a shared
# writable path (an agent's cache), as every run could when all were nobody.
RUN_UMASK = 0o002
LOCKS = Path("/run/steelframe/sandbox-uids")
PASSWD_NAME = "steelframe-run"
KILL_ROUNDS = 100  # release: killed processes leave the process table as they are reaped
KILL_PAUSE_SECONDS = 0.02


@dataclass(frozen=True)
class RunUser:
    """The uid and gid a run runs as, and for its log which it is and why."""

    uid: int
    gid: int
    own: bool  # a uid of the run's own (from the range); False: shared with other runs
    note: str


class UidLease:
    """A run's hold on its uid, from `lease` until `release` (idempotent)."""

    def __init__(self, user: RunUser, lock: int | None = None, passwd: Path | None = None):
        self.user = user
        self.passwd = passwd  # shown to the run as /etc/passwd; None: the host's
        self._lock = lock

    @property
    def held(self) -> bool:
        return self._lock is not None

    def release(self) -> None:
        """Kill what still runs as the run's own uid, then let the uid go (blocking: a
        few /proc reads, and short pauses while killed processes are reaped)."""
        if self._lock is None:
            return
        try:
            if self.user.own:
                kill_uid(self.user.uid)
        finally:
            os.close(self._lock)
            self._lock = None


def shared(note: str) -> UidLease:
    """Nobody, shared with every other run that is nobody: the old behaviour."""
    return UidLease(RunUser(NOBODY, NOBODY, own=False, note=f"runs as nobody ({NOBODY}), {note}"))


@dataclass(frozen=True)
class RangeStatus:
    """Whether a root worker's runs can get uids of their own here: what `lease` takes them
    from, found without taking one (also for /readyz and `steelframe doctor`)."""

    usable: tuple[int, ...]  # the range's uids that exist here, in order
    problem: str | None = None  # why every run is nobody; None when `usable` has uids


def range_status(uids: UidRange | None, locks: Path = LOCKS) -> RangeStatus:
    """The range's uids that exist in this user namespace, its lock folder made; or why
    none can be had (blocking: a read of /proc/self/uid_map, a mkdir)."""
    if uids is None:
        return RangeStatus((), "STEELFRAME_SANDBOX_UID_RANGE=off")
    extents = _uid_map()
    mapped = tuple(uid for uid in uids if _mapped(uid, extents))
    if not mapped:
        return RangeStatus(
            (),
            f"no uid of STEELFRAME_SANDBOX_UID_RANGE={uids} exists in this user namespace "
            "(a rootless or remapped container maps 65536 uids from 0)",
        )
    try:
        locks.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return RangeStatus((), f"the uid locks' folder {locks} ({exc.strerror or exc})")
    return RangeStatus(mapped)


def lease(uids: UidRange | None, locks: Path = LOCKS) -> UidLease:
    """A uid of the range no other run on this host holds and nothing runs as, or nobody
    (the log's note says why) where no range is set, none of it is usable or all is held."""
    found = range_status(uids, locks)
    if found.problem is not None:
        return shared(f"as every run: {found.problem}")
    busy = running_uids()
    for uid in found.usable:
        if uid in busy:
            continue
        lock = _try_lock(locks / f"{uid}.lock")
        if lock is None:
            continue
        try:
            passwd = _passwd(uid, locks)
        except OSError:
            os.close(lock)
            raise
        note = f"runs as uid {uid}, its own (STEELFRAME_SANDBOX_UID_RANGE={uids})"
        return UidLease(RunUser(uid, RUN_GROUP, own=True, note=note), lock, passwd)
    return shared(
        f"shared with other runs: all {len(found.usable)} uids of "
        f"STEELFRAME_SANDBOX_UID_RANGE={uids} are in use (widen it)"
    )


def _try_lock(path: Path) -> int | None:
    """The locked descriptor of `path`, or None when another run holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _passwd(uid: int, locks: Path) -> Path | None:
    """The host's /etc/passwd with an entry for `uid` added, when it has none (written by
    the uid's holder only, so no two writers meet)."""
    try:
        pwd.getpwuid(uid)
        return None
    except KeyError:
        pass
    try:
        host = Path("/etc/passwd").read_text()
    except OSError:
        host = ""
    if host and not host.endswith("\n"):
        host += "\n"
    entry = f"{PASSWD_NAME}:x:{uid}:{RUN_GROUP}:Steelframe run:/tmp:/usr/sbin/nologin\n"
    path = locks / f"{uid}.passwd"
    partial = path.with_suffix(".partial")
    partial.write_text(host + entry)
    partial.chmod(0o644)
    partial.replace(path)
    return path


def _uid_map() -> list[tuple[int, int]] | None:
    """This process's user namespace's uids, as (first, count); None: no user namespaces."""
    try:
        lines = Path("/proc/self/uid_map").read_text().splitlines()
    except OSError:
        return None
    extents = []
    for line in lines:
        inside, _, count = (int(part) for part in line.split())
        extents.append((inside, count))
    return extents


def _mapped(uid: int, extents: list[tuple[int, int]] | None) -> bool:
    """Whether `uid` exists in this process's user namespace (setpriv fails otherwise)."""
    if extents is None:
        return True  # no user namespaces: every uid exists
    return any(first <= uid < first + count for first, count in extents)


def running_uids() -> set[int]:
    """The real uids of every process on the host (RLIMIT_NPROC counts by real uid)."""
    return {uid for _, uid in _processes()}


def kill_uid(uid: int) -> bool:
    """SIGKILL every process whose real uid is `uid`, until none is left; False if some
    still were after the last round."""
    for _ in range(KILL_ROUNDS):
        pids = [pid for pid, real in _processes() if real == uid]
        if not pids:
            return True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(KILL_PAUSE_SECONDS)
    return False


def _processes() -> list[tuple[int, int]]:
    """(pid, real uid) of every process /proc shows."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{name}/status") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        found.append((int(name), int(line.split()[1])))
                        break
    return found
