"""Starting a sandboxed launch (`bot.lifecycle.sandbox.wrap`) inside a cgroup of its own,
where the host allows one (`bot.lifecycle.run_cgroup`), with its process limit decided for
this run: the group's `pids.max` when the group was made and limited, else RLIMIT_NPROC
(prlimit's `--nproc`, which `wrap` puts in every launch). Decided at each start, not once
per process: a host that allowed the readiness probe's group may refuse a later run's (its
cgroup full, its delegation changed), and that run must not go without a process limit.
Coding runs, setup and test commands and the egress probe all start here."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.lifecycle import run_cgroup
from bot.lifecycle.run_cgroup import RunCgroup
from bot.lifecycle.sandbox import Launch, SandboxPolicy

log = logging.getLogger(__name__)


def run_group(policy: SandboxPolicy) -> RunCgroup | None:
    """This run's group with its limits, or None where the host refuses one now."""
    try:
        return RunCgroup.make(policy.memory_mb, policy.max_processes, root=run_cgroup.CGROUP_ROOT)
    except OSError as exc:
        log.debug("no cgroup for this run (%s): its limits are per process", exc)
        return None


async def spawn(
    launch: Launch, policy: SandboxPolicy, **streams: Any
) -> tuple[asyncio.subprocess.Process, RunCgroup | None]:
    """The launched process (`streams`: create_subprocess_exec's other options), and its
    group, watched until it ends."""
    group = run_group(policy)
    if group is not None:
        launch = launch.in_own_group()
    try:
        with launch.command() as (argv, fds):
            process = await asyncio.create_subprocess_exec(
                *(group.joining(argv) if group else argv),
                cwd=launch.cwd,
                env=launch.env,
                pass_fds=fds,  # bwrap's options (the secrets) through a descriptor
                **streams,
            )
    except BaseException:
        if group is not None:
            group.remove()
        raise
    if group is not None:
        group.watch(process)
    return process, group
