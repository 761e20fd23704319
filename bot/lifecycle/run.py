"""One run of a task in a worker: lease, worktree, coding runtime, and what came of it.

`run_task` is what both RQ jobs call. Whatever happens, the lease is released and the
worktree removed at the end, and the task's results are delivered to its chat session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from bot.lifecycle import leases, tasks, worktree
from bot.lifecycle.agents.base import ASK_INSTRUCTION
from bot.lifecycle.agents.presets import PRESETS, Agent
from bot.lifecycle.agents.tally import Tally
from bot.lifecycle.coding import CodingOutcome, CodingRequest, CodingStatus, run_coding
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.delivery import deliver_pending
from bot.lifecycle.finish import finish_delivered, finish_failed, finish_question
from bot.lifecycle.leases import Holder
from bot.lifecycle.memory_task import memory_write, write_memory
from bot.lifecycle.models import EventKind, Task
from bot.lifecycle.outcomes import Change, change_state, publish
from bot.lifecycle.progress import Phase, update_progress
from bot.lifecycle.prompt import PromptInput, build_prompt, summary_of
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition, TaskState
from memory import ChunkIn, ChunkSource, Hit

log = logging.getLogger(__name__)
MEMORY_HITS = 5
MAX_MEMORY_TEXT = 20_000
MAX_MEMORY_PATHS = 50
# How often a run checks whether it was terminated (the lease is renewed less often).
STOP_POLL_SECONDS = 1.0
NO_RUNTIME_NOTICE = (
    "Steelframe picked up this issue, but no coding runtime is configured on its workers "
    "(neither `STEELFRAME_CODING_AGENT` nor `STEELFRAME_CODING_COMMAND` is set), so nothing "
    "was changed and no pull request "
    "will come from this run. Once a runtime is configured, publish a Decision on this issue "
    "to resume the task."
)


class RunStopped(Exception):
    """The run must end now without touching the task: terminated, or the lease was lost."""


@dataclass
class Watch:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = ""

    def check(self) -> None:
        if self.stop.is_set():
            raise RunStopped(self.reason)


async def run_task(ctx: LifecycleContext, task_id: int, *, continuation: bool) -> str:
    """Run the task once if this worker gets its lease; returns what happened, in words."""
    holder = Holder.this_process()
    actor = f"worker:{holder.host}:{holder.pid}"
    if not leases.acquire(ctx.db, task_id, holder, ttl=ctx.policy.lease_seconds, clock=ctx.clock):
        ctx.db.call(_ignored, task_id, actor, ctx)
        log.info("lifecycle: task %s: a run holds the lease; trigger ignored", task_id)
        return "ignored: another run holds the lease"
    log.info("lifecycle: task %s %s by %s", task_id, "continues" if continuation else "runs", actor)
    folder = worktree.run_root(ctx.worktrees, task_id, holder.run)
    try:
        return await _leased(ctx, task_id, holder, actor, folder)
    finally:
        await asyncio.to_thread(worktree.remove, folder)
        leases.release(ctx.db, task_id, holder)
        deliver_pending(ctx.db, task_id, clock=ctx.clock)


def _ignored(session: Session, task_id: int, actor: str, ctx: LifecycleContext) -> None:
    task = session.get(Task, task_id)
    if task is not None:
        tasks.record(
            session,
            task,
            EventKind.TRIGGER_IGNORED,
            actor=actor,
            detail="a run already holds this task's lease",
            clock=ctx.clock,
        )


def _start(ctx: LifecycleContext, task_id: int, actor: str) -> Task | str:
    """Move the task to running and count the attempt, or say why there is nothing to do."""
    task = ctx.db.call(tasks.get_task, task_id)
    if task.state not in (TaskState.QUEUED, TaskState.RUNNING):
        return f"skipped: task is {task.state}"
    if task.attempts >= ctx.policy.max_attempts:
        return "attempts"
    attempt = {"attempts": task.attempts + 1}
    if task.state == TaskState.QUEUED:
        change_state(
            ctx.db,
            task_id,
            TaskState.RUNNING,
            actor=actor,
            detail=f"attempt {task.attempts + 1} started",
            expect=[TaskState.QUEUED],
            changes=attempt,
            clock=ctx.clock,
        )
    else:
        # Running already: a resumed task, or a run whose worker died; we hold the lease,
        # so no other run is live.
        ctx.db.call(tasks.touch, task_id, ctx.clock, **attempt)
    return ctx.db.call(tasks.get_task, task_id)


async def _leased(
    ctx: LifecycleContext, task_id: int, holder: Holder, actor: str, folder: Path
) -> str:
    if ctx.github is None:
        return await _without_github(ctx, task_id, actor)
    async with ctx.github() as github:
        try:
            started = _start(ctx, task_id, actor)
        except IllegalTransition as exc:
            return f"skipped: task is {exc.current}"
        if started == "attempts":
            return await finish_failed(ctx, github, task_id, actor, limit="attempts", retry=False)
        if isinstance(started, str):
            return started
        watch = Watch()
        async with _watching(ctx, task_id, holder, watch):
            try:
                return await _work(ctx, github, started, holder, actor, watch, folder)
            except RunStopped as stopped:
                log.info("lifecycle: task %s run stopped (%s)", task_id, stopped)
                return f"stopped: {stopped}"
            except IllegalTransition as exc:
                # Someone else moved the task meanwhile (an operator terminated it).
                log.info("lifecycle: task %s became %s during the run", task_id, exc.current)
                return f"stopped: task became {exc.current}"
            except Exception as exc:
                if watch.stop.is_set():
                    return f"stopped: {watch.reason}"
                error = _describe(exc)
                log.warning("lifecycle: task %s attempt failed: %s", task_id, error)
                return await finish_failed(ctx, github, task_id, actor, error=error, retry=True)


async def _without_github(ctx: LifecycleContext, task_id: int, actor: str) -> str:
    try:
        started = _start(ctx, task_id, actor)
    except IllegalTransition as exc:
        return f"skipped: task is {exc.current}"
    if isinstance(started, str) and started != "attempts":
        return started
    return await finish_failed(
        ctx,
        None,
        task_id,
        actor,
        error="the GitHub App is not configured on this worker (APP_ID, PRIVATE_KEY)",
        retry=False,
    )


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return message[:1000]


@contextlib.asynccontextmanager
async def _watching(
    ctx: LifecycleContext, task_id: int, holder: Holder, watch: Watch
) -> AsyncIterator[None]:
    """Renew the lease and watch for termination while the body runs."""

    async def beat() -> None:
        interval = min(STOP_POLL_SECONDS, ctx.policy.heartbeat_seconds)
        since_renew = 0.0
        while not watch.stop.is_set():
            await asyncio.sleep(interval)
            since_renew += interval
            if since_renew >= ctx.policy.heartbeat_seconds:
                since_renew = 0.0
                renewed = await asyncio.to_thread(
                    leases.renew,
                    ctx.db,
                    task_id,
                    holder,
                    ttl=ctx.policy.lease_seconds,
                    clock=ctx.clock,
                )
                if not renewed:
                    watch.reason = "lease lost"
                    watch.stop.set()
                    return
            state = await asyncio.to_thread(ctx.db.call, lambda s: tasks.get_task(s, task_id).state)
            if state == TaskState.TERMINATED:
                watch.reason = "terminated"
                watch.stop.set()
                return

    beater = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater


async def _work(
    ctx: LifecycleContext,
    github: GitHubApi,
    task: Task,
    holder: Holder,
    actor: str,
    watch: Watch,
    folder: Path,
) -> str:
    await publish(
        ctx.db,
        github,
        Change(task.id, TaskState.RUNNING, 0, Phase.RUNNING, _attempt_note(ctx, task)),
        clock=ctx.clock,
    )
    if task.pushed_at is not None and await _existing_pull(ctx, github, task) is not None:
        return await finish_delivered(ctx, github, task.id, actor, summary="")
    issue = await github.get_issue(task.repo, task.issue)
    memory = memory_write(issue)  # a steelframe:memory task: the worker writes it itself
    if not ctx.policy.coding_command and memory is None:
        change = change_state(
            ctx.db,
            task.id,
            TaskState.WAITING_FOR_INFO,
            actor=actor,
            detail="no coding runtime is configured",
            data={"question": NO_RUNTIME_NOTICE},
            expect=[TaskState.RUNNING],
            changes={"question": NO_RUNTIME_NOTICE, "pending_decision": None},
            notice=NO_RUNTIME_NOTICE,
            note="No coding runtime is configured.",
            clock=ctx.clock,
        )
        await publish(ctx.db, github, change, clock=ctx.clock)
        return "waiting_for_info: no coding runtime"
    remaining = ctx.policy.time_limit - task.runtime_seconds
    if remaining <= 0:
        return await finish_failed(ctx, github, task.id, actor, limit="time", retry=False)
    token = await github.installation_token(task.repo)
    info = (await github.request("GET", task.repo, "")).data
    watch.check()
    leases.note_worktree(ctx.db, task.id, holder, path=str(folder))
    tree = await worktree.prepare(
        folder,
        clone_url=str(info["clone_url"]),
        token=token,
        branch=task.branch or tasks.branch_name(task.issue),
    )
    if memory is not None:
        prompt = f"Write the committed memory {memory.path} for #{task.issue}."
        outcome = await asyncio.to_thread(write_memory, tree.path, memory)
    else:
        hits = await _retrieve(ctx, task, str(issue.get("body") or ""))
        prompt = build_prompt(
            PromptInput(
                repo=task.repo,
                issue=task.issue,
                title=str(issue.get("title") or task.title),
                body=str(issue.get("body") or ""),
                branch=tree.branch,
                hits=hits,
                question=task.question,
                decision=task.pending_decision,
                **({"ask": ASK_INSTRUCTION} if _preset_label(ctx) else {}),
            )
        )
        outcome = await _code(
            ctx, github, task, tree.path, folder / "prompt.md", prompt, remaining, holder, watch
        )
    ctx.db.call(
        tasks.touch,
        task.id,
        ctx.clock,
        runtime_seconds=task.runtime_seconds + outcome.seconds,
        tokens_used=task.tokens_used + outcome.tokens,
        cost_usd=task.cost_usd + outcome.cost_usd,
    )
    watch.check()
    await _remember(ctx, task, prompt, outcome, await _paths(tree))
    if outcome.status in (CodingStatus.TIMED_OUT, CodingStatus.LIMIT):
        return await finish_failed(
            ctx, github, task.id, actor, limit=outcome.limit or "time", retry=False
        )
    if outcome.status == CodingStatus.ERROR:
        return await finish_failed(ctx, github, task.id, actor, error=outcome.error, retry=True)
    if outcome.status == CodingStatus.QUESTION:
        # Keep what the runtime did so far on the branch; the continuation starts from it.
        if await worktree.commit_all(tree, f"Work in progress on #{task.issue}"):
            await worktree.push(tree, token=await github.installation_token(task.repo))
            ctx.db.call(tasks.touch, task.id, ctx.clock, pushed_at=ctx.clock())
        return await finish_question(ctx, github, task, actor, outcome.question)
    await worktree.commit_all(tree, f"{task.title} (#{task.issue})")
    if await worktree.commits_ahead(tree) == 0:
        return await finish_failed(
            ctx,
            github,
            task.id,
            actor,
            error="the coding runtime finished without changing anything"
            + (f": {outcome.summary}" if outcome.summary else ""),
            retry=False,
        )
    watch.check()
    await worktree.push(tree, token=await github.installation_token(task.repo))
    ctx.db.call(tasks.touch, task.id, ctx.clock, pushed_at=ctx.clock())
    watch.check()
    await _open_pull(ctx, github, task, tree.base, outcome.summary)
    return await finish_delivered(ctx, github, task.id, actor, summary=outcome.summary)


async def _paths(tree: worktree.Worktree) -> list[str]:
    try:
        return await worktree.changed_paths(tree)
    except worktree.WorktreeError:
        return []


def _attempt_note(ctx: LifecycleContext, task: Task) -> str:
    return f"Attempt {task.attempts} of {ctx.policy.max_attempts} is running."


async def _retrieve(ctx: LifecycleContext, task: Task, body: str) -> list[Hit]:
    if ctx.memory is None:
        return []
    try:
        found = await asyncio.to_thread(
            ctx.memory.search,
            f"{task.title}\n{body}",
            repo=task.repo,
            focus=task.issue,
            k=MEMORY_HITS,
        )
        return list(found)
    except Exception as exc:  # retrieval never fails a run (same rule as Chat)
        log.warning("lifecycle: task %s memory search failed: %s", task.id, _describe(exc))
        return []


async def _remember(
    ctx: LifecycleContext, task: Task, prompt: str, outcome: CodingOutcome, paths: list[str]
) -> None:
    if ctx.memory is None:
        return
    text = "\n".join(
        [
            f"Worker session for {task.repo}#{task.issue} (task {task.id}, attempt "
            f"{task.attempts}): {outcome.status}",
            f"Prompt: {summary_of(prompt)}",
            f"Summary: {outcome.summary}" if outcome.summary else "",
            f"Question: {outcome.question}" if outcome.question else "",
            f"Error: {outcome.error}" if outcome.error else "",
            "Output:",
            *outcome.log_tail[-20:],
        ]
    )
    try:
        chunk = ChunkIn(
            text=text[:MAX_MEMORY_TEXT],
            source=ChunkSource.WORKER_SESSION,
            repo=task.repo,
            issue=task.issue,
            session_id=(outcome.session_id or "")[:64] or None,
            paths=tuple(paths[:MAX_MEMORY_PATHS]),
            key=f"worker-session:task-{task.id}:g{task.generation}:a{task.attempts}"
            + (f":d{task.decision_comment_id}" if task.decision_comment_id else ""),
        )
        await asyncio.to_thread(ctx.memory.add, [chunk])
    except Exception as exc:
        log.warning("lifecycle: task %s run not recorded in memory: %s", task.id, _describe(exc))


def _preset_label(ctx: LifecycleContext) -> str | None:
    """The agent's name when a preset (not a protocol-speaking command) runs."""
    agent = ctx.policy.coding_agent
    preset = PRESETS.get(Agent(agent)) if agent else None
    return preset.label if preset else None


def _agent_env(ctx: LifecycleContext, task: Task) -> dict[str, str]:
    """What the adapter of a preset needs to know (docs/runtimes.md, "Coding agents")."""
    policy = ctx.policy
    env = {
        "STEELFRAME_AGENT_MAX_TURNS": str(policy.max_turns),
        # Kept between the runs of a task, so a resumed session finds its files.
        "STEELFRAME_AGENT_HOME": str(
            (ctx.settings.data_dir / "agent-homes" / f"task-{task.id}").resolve()
        ),
    }
    if policy.coding_model:
        env["STEELFRAME_AGENT_MODEL"] = policy.coding_model
    if policy.max_cost_usd is not None:
        env["STEELFRAME_AGENT_BUDGET_USD"] = f"{max(policy.max_cost_usd - task.cost_usd, 0):.4f}"
    if policy.coding_prices:
        env["STEELFRAME_AGENT_PRICES"] = json.dumps(policy.coding_prices)
    return env


def _progress_hook(
    ctx: LifecycleContext, github: GitHubApi, task: Task, label: str
) -> tuple[Callable[[str, str], None], list[asyncio.Future[Any]]]:
    """Count the agent's steps; edit the progress comment with them, throttled."""
    tally = Tally()
    pending: list[asyncio.Future[Any]] = []
    note = _attempt_note(ctx, task)

    def on_progress(action: str, name: str) -> None:
        tally.add(action, name)
        if not tally.due(time.monotonic()) or any(not f.done() for f in pending):
            return
        words = f"{note}\n\n{tally.words(label)}"
        pending.append(
            asyncio.ensure_future(
                update_progress(
                    ctx.db, github, task.id, Phase.RUNNING, words, create=False, clock=ctx.clock
                )
            )
        )

    return on_progress, pending


async def _code(
    ctx: LifecycleContext,
    github: GitHubApi,
    task: Task,
    cwd: Path,
    prompt_file: Path,
    prompt: str,
    remaining: float,
    holder: Holder,
    watch: Watch,
) -> CodingOutcome:
    assert ctx.policy.coding_command is not None

    async def on_start(pid: int) -> None:
        await asyncio.to_thread(leases.note_child, ctx.db, task.id, holder, pgid=pid)

    async def on_session(session_id: str | None, transcript: str | None) -> None:
        def store(session: Session) -> None:
            tasks.touch(
                session,
                task.id,
                ctx.clock,
                runtime_session=session_id,
                runtime_transcript=transcript,
            )
            tasks.record(
                session,
                tasks.get_task(session, task.id),
                EventKind.RUNTIME_SESSION,
                actor="coding-runtime",
                detail=f"runtime session {session_id}",
                data={"session_id": session_id, "transcript": transcript},
                clock=ctx.clock,
            )

        await asyncio.to_thread(ctx.db.call, store)

    def on_usage(tokens: int, cost: float) -> str | None:
        policy = ctx.policy
        if policy.max_tokens is not None and task.tokens_used + tokens > policy.max_tokens:
            return "tokens"
        if policy.max_cost_usd is not None and task.cost_usd + cost > policy.max_cost_usd:
            return "cost"
        return None

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
    label = _preset_label(ctx)
    on_progress, updates = _progress_hook(ctx, github, task, label or "The coding runtime")
    if label:
        env.update(_agent_env(ctx, task))
    try:
        return await run_coding(
            CodingRequest(
                command=ctx.policy.coding_command,
                cwd=cwd,
                prompt=prompt,
                prompt_file=prompt_file,
                time_limit=remaining,
                task_env=env,
            ),
            stop=watch.stop,
            on_start=on_start,
            on_session=on_session,
            on_usage=on_usage,
            on_progress=on_progress,
        )
    finally:
        await asyncio.to_thread(leases.note_child, ctx.db, task.id, holder, pgid=None)
        # A progress edit never fails the run; the state change that follows rewrites it.
        for result in await asyncio.gather(*updates, return_exceptions=True):
            if isinstance(result, Exception):
                log.warning("lifecycle: task %s progress not shown: %s", task.id, result)


async def _existing_pull(
    ctx: LifecycleContext, github: GitHubApi, task: Task
) -> dict[str, Any] | None:
    branch = task.branch or tasks.branch_name(task.issue)
    pulls = await github.list_pulls(task.repo, head=branch, state="open")
    if not pulls:
        return None
    pull = pulls[0]
    ctx.db.call(
        tasks.touch,
        task.id,
        ctx.clock,
        pr_number=int(pull["number"]),
        pr_url=str(pull.get("html_url") or pull.get("url") or ""),
    )
    return pull


async def _open_pull(
    ctx: LifecycleContext, github: GitHubApi, task: Task, base: str, summary: str
) -> None:
    """Open the pull request once: an existing one for the branch is adopted, not doubled."""
    if await _existing_pull(ctx, github, task) is not None:
        return
    branch = task.branch or tasks.branch_name(task.issue)
    body = f"Fixes #{task.issue}\n\n{summary or 'Changes made by Steelframe.'}\n\n" + (
        f"<!-- steelframe-task {task.id} -->"
    )
    title = task.title
    if ctx.policy.coding_agent == "demo":
        title = f"{title} (demo runtime)"
    pull = await github.create_pull(task.repo, title=title, head=branch, base=base, body=body)
    ctx.db.call(
        tasks.touch,
        task.id,
        ctx.clock,
        pr_number=int(pull["number"]),
        pr_url=str(pull.get("html_url") or pull.get("url") or ""),
    )
