"""Recovering a run whose worker died: kill its orphan, drop its lease, retry or fail.

Called by RQ's failure handling (a job that raised, a work horse that was killed) and by
the reconciler (a lease that expired). A task is never left `running` without a live run.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

from bot.lifecycle import leases, tasks, terminate, worktree
from bot.lifecycle.coding import group_alive, kill_group
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.delivery import deliver_pending
from bot.lifecycle.finish import finish_failed
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import TaskState

log = logging.getLogger(__name__)


def clean_orphans(ctx: LifecycleContext, task_id: int, *, dead_pid: int | None) -> bool:
    """Drop the task's lease if its holder is dead, killing what it left on this host.

    True when no live run holds the task any more."""
    now = ctx.clock()
    lease = ctx.db.call(leases.current, task_id)
    if lease is None:
        return True
    dead = lease.expires_at < now or (dead_pid is not None and lease.pid == dead_pid)
    if not dead:
        return False
    if lease.host == socket.gethostname():
        if lease.child_pgid and group_alive(lease.child_pgid):
            log.warning("recovery: task %s: killing orphan group %s", task_id, lease.child_pgid)
            kill_group(lease.child_pgid)
        if lease.worktree:
            worktree.remove(Path(lease.worktree))
    if dead_pid is not None and lease.pid == dead_pid:
        leases.release(ctx.db, task_id, leases.Holder(lease.holder, lease.host, lease.pid))
        return True
    return bool(ctx.db.call(leases.drop_expired, task_id, lease.holder, now))


async def recover(
    ctx: LifecycleContext,
    github: GitHubApi | None,
    task_id: int,
    *,
    reason: str,
    dead_pid: int | None,
    actor: str = "reconciler",
) -> str:
    """A task left `running` by a run that is gone: terminated if an operator asked, else
    retried (or failed, out of attempts) in `actor`'s name (who found the run gone)."""
    if not await asyncio.to_thread(clean_orphans, ctx, task_id, dead_pid=dead_pid):
        return "live: a run holds the lease"
    task = await ctx.db.run(tasks.get_task, task_id)
    if task.state != TaskState.RUNNING:
        return f"nothing to do: task is {task.state}"
    # An operator terminated it while this run (frozen) held the row: honour that, no retry.
    # (A request recorded after this look, while the retry or failure below waits on the
    # row, is honoured by that decision itself: `terminate.unless_requested`.)
    asked = await ctx.db.run(terminate.requested_by, task_id)
    if asked is not None and await terminate.apply(ctx.db, github, task_id, asked, ctx.clock):
        return f"terminated as {asked} asked"
    log.warning("recovery: task %s was left running (%s)", task_id, reason)
    result = await finish_failed(ctx, github, task_id, actor, error=reason, retry=True)
    await asyncio.to_thread(deliver_pending, ctx.db, task_id, clock=ctx.clock)
    return result


def recover_dead_run(
    ctx: LifecycleContext, task_id: int, *, reason: str, dead_pid: int | None
) -> str:
    """`recover` for synchronous callers (RQ callbacks), with a GitHub client of its own."""

    async def main() -> str:
        if ctx.github is None:
            return await recover(ctx, None, task_id, reason=reason, dead_pid=dead_pid)
        async with ctx.github() as github:
            return await recover(ctx, github, task_id, reason=reason, dead_pid=dead_pid)

    try:
        return asyncio.run(main())
    except Exception:
        log.exception("recovery: task %s not recovered now; the reconciler retries", task_id)
        return "error"
