"""Starting a sandboxed launch (`bot.lifecycle.sandbox.wrap`) inside a cgroup of its own,
where the host allows one (`bot.lifecycle.run_cgroup`), with its process limit decided for
this run: the group's `pids.max` when the group was made and limited, else RLIMIT_NPROC
(prlimit's `--nproc`, which `wrap` puts in every launch). Decided at each start, not once
per process: a host that allowed the readiness probe's group may refuse a later run's (its
cgroup full, its delegation changed), and that run must not go without a process limit.
As root, the run also gets a uid of its own here (`bot.lifecycle.sandbox_uid`), held until
it ended, so RLIMIT_NPROC counts this run's processes and no other's.
Coding runs, setup and test commands and the egress probe all start here."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from bot.lifecycle import run_cgroup, sandbox_uid
from bot.lifecycle.run_cgroup import RunCgroup
from bot.lifecycle.sandbox import Launch, SandboxPolicy
from bot.lifecycle.sandbox_uid import UidLease

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Spawned:
    """A started run: its process, its group (None: per-process limits) and what its log
    says of who it runs as and what its process limit counts."""

    process: asyncio.subprocess.Process
    group: RunCgroup | None
    note: str
    _done: asyncio.Task[None]

    async def ended(self) -> None:
        """Until the run is over on the host: its group removed, its uid let go. Only its
        own: other runs go on."""
        await asyncio.wait({self._done})  # not cancelled with the caller


def run_group(policy: SandboxPolicy) -> RunCgroup | None:
    """This run's group with its limits, or None where the host refuses one now."""
    try:
        return RunCgroup.make(policy.memory_mb, policy.max_processes, root=run_cgroup.CGROUP_ROOT)
    except OSError as exc:
        log.debug("no cgroup for this run (%s): its limits are per process", exc)
        return None


def _lease(launch: Launch, policy: SandboxPolicy) -> UidLease | None:
    """The run's uid where the sandbox changes it (a root worker's), else None."""
    if launch.user_at is None:
        return None
    return sandbox_uid.lease(policy.uid_range, policy.uid_locks)


def _note(launch: Launch, policy: SandboxPolicy, group: RunCgroup | None) -> str:
    """One line for the run's log: who it runs as and what its process limit counts."""
    if group is not None:
        limit = f"its cgroup's pids.max ({policy.max_processes}): this run's processes"
    elif launch.user is not None and launch.user.own:
        limit = f"RLIMIT_NPROC ({policy.max_processes}): the processes of its uid, this run's"
    else:
        limit = f"RLIMIT_NPROC ({policy.max_processes}): every process of its uid, other runs' too"
    if launch.user is not None:
        who = launch.user.note
    elif launch.sandboxed:
        who = "runs as the worker's uid in a user namespace of its own"
    else:
        who = "runs as the worker's user, unsandboxed"
    return f"sandbox: {who}; process limit: {limit}"


async def spawn(launch: Launch, policy: SandboxPolicy, **streams: Any) -> Spawned:
    """The launched process (`streams`: create_subprocess_exec's other options), with its
    group watched and its uid held until it ends."""
    group = run_group(policy)
    if group is not None:
        launch = launch.in_own_group()
    held: UidLease | None = None
    try:
        # Here, not in a thread: a cancellation while a thread took the lock would leave
        # it held by nobody's reference until the worker exits (a few ms of /proc reads).
        held = _lease(launch, policy)
        if held is not None:
            launch = launch.as_user(held.user, held.passwd)
        await asyncio.to_thread(launch.hand_over)  # a large copy's chown: off the loop
        own = launch.user is not None and launch.user.own
        with launch.command() as (argv, fds):
            process = await asyncio.create_subprocess_exec(
                *(group.joining(argv) if group else argv),
                cwd=launch.cwd,
                env=launch.env,
                pass_fds=fds,  # bwrap's options (the secrets) through a descriptor
                umask=sandbox_uid.RUN_UMASK if own else -1,
                **streams,
            )
    except BaseException:
        if group is not None:
            group.remove()
        if held is not None:
            held.release()
        raise
    if group is not None:
        group.watch(process)
    note = _note(launch, policy, group)
    log.info("run %s: %s", process.pid, note)
    done = asyncio.get_running_loop().create_task(_end(process, group, held))
    _ending.add(done)
    done.add_done_callback(_ending.discard)
    return Spawned(process, group, note, done)


_ending: set[asyncio.Task[None]] = set()  # keeps each run's end referenced until it is over


async def _end(
    process: asyncio.subprocess.Process, group: RunCgroup | None, held: UidLease | None
) -> None:
    """Once the process ended: the group's watch over (its leftovers killed), then the uid
    let go (what still runs as it killed first)."""
    try:
        await process.wait()
        if group is not None:
            await group.ended()
    finally:
        if held is not None:
            await asyncio.to_thread(held.release)
