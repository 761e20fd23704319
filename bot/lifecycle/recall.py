"""Memory around a run: what it retrieves for its prompt, and the record it leaves.

The record (a `worker_session` chunk) is redacted: memory feeds Chat and later prompts.
"""

from __future__ import annotations

import asyncio
import logging

from bot.lifecycle.coding import CodingOutcome
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import Task
from bot.lifecycle.prompt import summary_of
from memory import ChunkIn, ChunkSource, Hit

log = logging.getLogger(__name__)
MEMORY_HITS = 5
MAX_MEMORY_TEXT = 20_000
MAX_MEMORY_PATHS = 50


async def retrieve(ctx: LifecycleContext, task: Task, body: str) -> list[Hit]:
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
        log.warning("lifecycle: task %s memory search failed: %s", task.id, type(exc).__name__)
        return []


async def remember(
    ctx: LifecycleContext, task: Task, prompt: str, outcome: CodingOutcome, paths: list[str]
) -> None:
    if ctx.memory is None:
        return
    public = ctx.redactor.public_block
    text = "\n".join(
        [
            f"Worker session for {task.repo}#{task.issue} (task {task.id}, attempt "
            f"{task.attempts}): {outcome.status}",
            f"Prompt: {summary_of(ctx.redactor.redact(prompt))}",
            f"Summary: {public(outcome.summary, 2000)}" if outcome.summary else "",
            f"Question: {public(outcome.question, 2000)}" if outcome.question else "",
            f"Error: {outcome.error}" if outcome.error else "",
            f"Runtime's reason: {ctx.redactor.public_text(outcome.reason, 200)}"
            if outcome.reason
            else "",
        ]
    )
    session_id = ctx.redactor.redact(outcome.session_id or "")[:64] or None
    try:
        chunk = ChunkIn(
            text=text[:MAX_MEMORY_TEXT],
            source=ChunkSource.WORKER_SESSION,
            repo=task.repo,
            issue=task.issue,
            session_id=session_id,
            paths=tuple(ctx.redactor.redact(p) for p in paths[:MAX_MEMORY_PATHS]),
            key=f"worker-session:task-{task.id}:g{task.generation}:a{task.attempts}"
            + (f":d{task.decision_comment_id}" if task.decision_comment_id else ""),
        )
        await asyncio.to_thread(ctx.memory.add, [chunk])
    except Exception as exc:
        log.warning(
            "lifecycle: task %s run not recorded in memory: %s", task.id, type(exc).__name__
        )
