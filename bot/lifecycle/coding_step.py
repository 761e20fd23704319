"""The coding step of a run: the runtime started in its sandbox with the task's prompt,
its limits watched, its session and what its egress proxy refused recorded (kept even when
the run lost its lease: they are records for operators, not changes of the task).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

from sqlalchemy.orm import Session

from bot.lifecycle import budget, egress_blocked, leases, plan_flow, tasks, worktree
from bot.lifecycle.coding import MAX_TRANSCRIPT_CHARS, CodingOutcome, CodingRequest, run_coding
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.presets_run import agent_env, agent_home, preset_label, progress_hook
from bot.lifecycle.sandbox import SandboxRun
from bot.lifecycle.scope import Run
from bot.lifecycle.tasks import LeaseLost

log = logging.getLogger(__name__)


def task_env(task: Task) -> dict[str, str]:
    """The task as the coding command sees it (docs/lifecycle.md, the coding-command
    protocol): its ids, the Decision it resumes with, and the session to resume."""
    env = {
        "STEELFRAME_TASK_ID": str(task.id),
        "STEELFRAME_REPO": task.repo,
        "STEELFRAME_ISSUE": str(task.issue),
        "STEELFRAME_ATTEMPT": str(task.attempts),
    }
    if task.pending_decision:
        env["STEELFRAME_DECISION"] = task.pending_decision
    if task.runtime_session:
        env["STEELFRAME_RESUME_SESSION"] = task.runtime_session
    if task.runtime_transcript:
        env["STEELFRAME_RESUME_TRANSCRIPT"] = task.runtime_transcript
    return env


def _run_env(run: Run, label: str | None, *, plan: bool) -> tuple[dict[str, str], Path | None]:
    """The coding command's environment, and the preset's home when a preset runs."""
    env = task_env(run.task)
    if plan:  # the plan run: told so, and the repository mounted read-only
        env[plan_flow.MODE_VARIABLE] = plan_flow.PLAN_MODE
    if not label:
        return env, None
    home = agent_home(run.ctx, run.task)
    env.update(agent_env(run.ctx, run.task, home))
    return env, home


async def code(
    run: Run, tree: worktree.Worktree, prompt: str, remaining: float, *, plan: bool = False
) -> CodingOutcome:
    """The coding runtime on the task in the sandbox; `plan`: the plan-first run (told so,
    the repository mounted read-only)."""
    ctx, task = run.ctx, run.task
    assert ctx.policy.coding_command is not None

    async def on_start(pid: int) -> None:
        await asyncio.to_thread(leases.note_child, ctx.db, task.id, run.holder, pgid=pid)

    async def on_session(session_id: str | None, transcript: str | None) -> None:
        try:
            await asyncio.to_thread(ctx.db.call, _store_session, run, session_id, transcript)
        except LeaseLost:
            run.watch.halt("lease lost")

    limits = budget.for_run(run)  # the setting, or the repository config's budget

    def on_usage(tokens: int, cost: float) -> str | None:
        return limits.exceeded(task.tokens_used + tokens, task.cost_usd + cost)

    label = preset_label(ctx)
    on_progress, updates = progress_hook(run, label or "The coding runtime")
    env, home = _run_env(run, label, plan=plan)
    sandboxed = SandboxRun(
        repo=tree.path, tmp=run.folder / "tmp", prompt=run.folder / "prompt.md", home=home
    )
    request = CodingRequest(
        command=ctx.policy.coding_command,
        run=sandboxed,
        prompt=prompt,
        time_limit=remaining,
        task_env=env,
        policy=replace(ctx.policy.sandbox, repo_read_only=plan),
        base_env=ctx.environment.variables,  # read at the worker's start, not per job
    )
    try:
        outcome = await run_coding(
            request,
            stop=run.watch.stop,
            on_start=on_start,
            on_session=on_session,
            on_usage=on_usage,
            on_progress=on_progress,
        )
        # A record for operators and the pull request, kept even if the lease was lost.
        blocked = outcome.blocked
        await asyncio.to_thread(ctx.db.call, _store_blocked, task, blocked)
        return outcome
    finally:
        await asyncio.to_thread(leases.note_child, ctx.db, task.id, run.holder, pgid=None)
        # A progress edit never fails the run; the state change that follows rewrites it.
        for result in await asyncio.gather(*updates, return_exceptions=True):
            if isinstance(result, Exception):
                log.warning("lifecycle: task %s progress not shown: %s", task.id, result)


def _store_blocked(session: Session, task: Task, found: list[egress_blocked.BlockedHost]) -> None:
    # Added to what setup's commands were refused, if it ran (the same run's record).
    egress_blocked.add(session, task.id, task.generation, task.attempts, found)


def _store_session(
    session: Session, run: Run, session_id: str | None, transcript: str | None
) -> None:
    redact = run.ctx.redactor.redact
    session_id = redact(session_id)[:200] if session_id else None
    # Cut once redacted: a secret cut in two would no longer be recognised.
    transcript = redact(transcript)[:MAX_TRANSCRIPT_CHARS] if transcript else None
    tasks.touch(
        session,
        run.task.id,
        run.ctx.clock,
        fence=run.fence,
        runtime_session=session_id,
        runtime_transcript=transcript,
    )
    tasks.record(
        session,
        tasks.get_task(session, run.task.id),
        EventKind.RUNTIME_SESSION,
        actor="coding-runtime",
        detail=f"runtime session {session_id}",
        data={"session_id": session_id, "transcript": transcript},
        clock=run.ctx.clock,
    )
