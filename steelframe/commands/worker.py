"""The work of `steelframe worker` (RQ workers for the lifecycle queue) and `steelframe
reconcile`; their options are in worker_options.py.

Reconciling is one process's job at a time across every worker: each pass first takes a
Redis lease (`bot.redis_lease`); a worker that finds it held skips that pass.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable

from bot import db as dbmod
from bot.config import Settings
from bot.lifecycle.agents.installed import agent_problem
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.queue import rq_queue
from bot.lifecycle.reconcile import (
    RECONCILER_LEASE_SECONDS,
    reconcile_as_leader,
    reconcile_if_leader,
    reconcile_until,
)
from bot.lifecycle.worker import InProcessWorker, LifecycleWorker
from bot.redis_auth import require_authenticated_redis
from bot.serving_checks import coding_runtime_check, github_app_check
from bot.stop_request import StopRequest
from steelframe.cli import load_settings, require_data_dir
from steelframe.collector import thaw
from steelframe.commands.narration import Narrator
from steelframe.logs import configure_logging
from steelframe.worker_context import build_worker_context

log = logging.getLogger("steelframe.worker")


def _context(queue: str | None, *, command: str) -> tuple[LifecycleContext, Narrator] | None:
    """The lifecycle's context for `command` (logging set up, migrations applied) and what
    says its progress, or None after saying that the lifecycle needs Redis."""
    settings = load_settings()
    require_authenticated_redis(settings)  # a refusal first, before any warning or work
    if not settings.redis_url:  # nothing can start: no warnings about what it would do
        print("steelframe: the lifecycle needs Redis: set STEELFRAME_REDIS_URL", file=sys.stderr)
        return None
    configure_logging(settings)
    narrator = Narrator.for_command(
        settings, logger="steelframe.worker", prefix=f"steelframe {command}"
    )
    if command == "worker":  # it takes tasks; `reconcile` only repairs what is there
        _warn_about_coding(settings, narrator)
    require_data_dir(settings)  # worktrees and the setup cache: unwritable, one line, no work
    ctx = build_worker_context(settings, environ=os.environ, queue_name=queue)
    ctx.redis.ping()  # unreachable: one line naming STEELFRAME_REDIS_URL (cli.main), no work
    narrator.say("steelframe: applying migrations ...")
    dbmod.upgrade(ctx.db.engine)
    return ctx, narrator


def _warn_about_coding(settings: Settings, narrator: Narrator) -> None:
    """A worker without the App or a coding agent takes tasks it cannot finish: say so."""
    for check in (github_app_check(settings), coding_runtime_check(settings)):
        if not check.ok or check.note:
            narrator.warn(check.detail)
    problem = agent_problem(settings.coding_agent)  # claude, codex, aider: installed here?
    if problem:
        narrator.warn(f"{problem}; its tasks fail until that is fixed (steelframe doctor)")


def _reconciling(narrator: Narrator) -> Callable[[str], None]:
    return lambda line: narrator.say(f"reconcile: {line}")


def cmd_reconcile(args: argparse.Namespace) -> int:
    started = _context(args.queue, command="reconcile")
    if started is None:
        return 2
    ctx, narrator = started
    report = reconcile_if_leader(ctx, say=_reconciling(narrator))
    if report is None:
        print("steelframe: another process is reconciling now; try again shortly", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    return 1 if report.errors else 0


def cmd_worker(args: argparse.Namespace) -> int:
    # From here on a stop signal lets start-up finish its step (a migration, a reconcile
    # pass) and the worker leave cleanly, instead of killing it halfway.
    stop_request = StopRequest().install()
    try:
        return _work(args, stop_request)
    finally:
        stop_request.restore()


def _work(args: argparse.Namespace, stop_request: StopRequest) -> int:
    # A forking worker freezes its heap at each fork (bot.heap_freeze.frozen_for_fork) and
    # undoes it after: it can undo only a freeze nothing made before it.
    thaw()
    started = _context(args.queue, command="worker")
    if started is None:
        return 2
    ctx, narrator = started
    say_reconciling = _reconciling(narrator)
    narrator.say("steelframe worker: reconciling before work ...")
    report = reconcile_if_leader(ctx, say=say_reconciling)
    if report is None and not stop_request.requested:
        # Another worker's pass, or the lease of one that died during its pass: wait for
        # either to end, since this pass recovers what a crashed worker was running.
        say_reconciling(
            "another worker is reconciling; waiting for its pass"
            f" (at most {RECONCILER_LEASE_SECONDS:.0f} s) ..."
        )
        report = reconcile_as_leader(ctx, say=say_reconciling, pause=stop_request.wait)
    if report is None and not stop_request.requested:
        say_reconciling("the lease stayed taken; skipped")
    for line in report.lines() if report is not None else []:
        say_reconciling(line)
    if stop_request.requested:
        narrator.say(f"steelframe worker: {stop_request.signal_name} while starting; stopped")
        ctx.db.dispose()
        return 0
    queue = rq_queue(ctx.queue_name, ctx.redis)
    worker_class = InProcessWorker if args.in_process else LifecycleWorker
    worker = worker_class([queue], connection=ctx.redis, lifecycle=ctx, stop_request=stop_request)
    stop = threading.Event()
    if not args.burst:
        threading.Thread(
            target=reconcile_until, args=(ctx, stop), name="reconciler", daemon=True
        ).start()
    narrator.say(f"steelframe worker: {worker.name} listening on {ctx.queue_name}")
    try:
        worker.work(
            burst=args.burst,
            with_scheduler=not args.in_process,
            logging_level=ctx.settings.log_level.upper(),
        )
    finally:
        stop.set()
        ctx.db.dispose()
    return 0
