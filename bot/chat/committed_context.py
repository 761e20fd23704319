"""What every turn's grounding carries whatever retrieval finds: the repository's committed
memory and `related:` table, the focused task, the newest summaries for the recency
fallback (read together before the rounds: `TurnPreparation` makes a `Prepared`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from bot.background import BackgroundTasks
from bot.chat.blocks import committed_block, fallback_block
from bot.chat.grounding import NO_SEMANTIC_HITS, Answerability, Grounding
from bot.chat.retrieval_hits import (
    RECENCY_LIMIT,
    RELATIVE_MARGIN,
    STRONG_SCORE,
    RetrievedHit,
    RoundQuery,
    count_of,
    reason_of,
    retrieved,
)
from bot.config import AgentConfig
from bot.contracts.chat import Emit, StatusFrame
from bot.contracts.tasks import FocusedTask
from bot.contracts.turn_meta import CommittedMeta, RetrievalMeta
from memory import Hit, Memory, read_committed
from memory.committed import CommittedMemory, read_related
from memory.sync import SyncReport

log = logging.getLogger(__name__)
SYNC_ROWS_PER_TURN = 2_000  # a big backlog is caught up over several turns (or `reindex`)
# The focused issue's task (bot.lifecycle.board.focused_task, handed in by steelframe/parts.py).
TaskLookup = Callable[[AgentConfig, int], FocusedTask | None]
COMMITTED_BUDGET = 8_000
# A corrupt index a turn meets is rebuilt in the background, at most once in this long: a
# rebuild that fails (a full or read-only disk) is not tried again on every turn.
REPAIR_RETRY_SECONDS = 300.0


@dataclass(frozen=True)
class Prepared:
    committed: CommittedMemory
    task: FocusedTask | None
    synced: tuple[SyncReport, bool] | Exception  # the index's catch-up report and merge_due
    recent: list[Hit] | Exception  # the newest summaries: the recency fallback
    related: tuple[str, ...] = ()  # the committed `related:` table (memory.committed)


def recent_hits(prepared: list[Hit] | Exception) -> list[RetrievedHit]:
    if isinstance(prepared, Exception):
        log.warning("recent summaries unavailable: %s", reason_of(prepared))
        return []
    return [retrieved(hit, RoundQuery.RECENCY) for hit in prepared]


def read_committed_memory(agent: AgentConfig) -> CommittedMemory:
    try:
        return read_committed(agent.checkout, budget=COMMITTED_BUDGET)
    except OSError as exc:
        log.warning("committed memory unreadable for agent %s: %s", agent.name, reason_of(exc))
        return CommittedMemory()


def related_table(agent: AgentConfig) -> tuple[str, ...]:
    try:
        return read_related(agent.checkout)
    except OSError as exc:  # read_related reports what it can; this is the rest
        log.warning("related table unreadable for agent %s: %s", agent.name, reason_of(exc))
        return ()


def committed_meta(committed: CommittedMemory) -> CommittedMeta:
    return {
        "files": [f.path for f in committed.files],
        "truncated": [f.path for f in committed.files if f.truncated],
        "omitted": committed.omitted,
        "skipped": committed.skipped,
    }


def base_grounding(prepared: Prepared, floor: float) -> Grounding:
    """What every turn's grounding carries, whatever retrieval finds: committed memory,
    the focused task, the thresholds in force."""
    committed = prepared.committed
    return Grounding(
        committed_memory=list(committed.files),
        committed_block=committed_block(committed),
        task=prepared.task,
        meta={
            "floor": floor,
            "margin": RELATIVE_MARGIN,
            "strong": STRONG_SCORE,
            "committed": committed_meta(committed),
        },
    )


async def recency_fallback(
    base: Grounding,
    meta: RetrievalMeta,
    judged: Answerability,
    prepared: Prepared,
    emit: Emit,
) -> Grounding:
    """No semantic hit: the most recent summaries instead, said so in the status line."""
    recent = recent_hits(prepared.recent)
    await emit(
        StatusFrame(
            text=f"{NO_SEMANTIC_HITS} · "
            + count_of(len(recent), "recent summary", "recent summaries")
        )
    )
    return replace(
        base,
        hits=recent,
        recency_fallback=True,
        prompt_block=fallback_block(recent),
        meta={**meta, "retrieval": "recency fallback"},
        answerability=judged,
    )


class TurnPreparation:
    """Reads what a turn needs before it searches (`prepare`), merges the index's segments
    in the background when the catch-up says it is due, and rebuilds an index a turn found
    corrupt (it was reported until the process restarted or someone ran `reindex`)."""

    def __init__(
        self,
        memory: Memory,
        *,
        background: BackgroundTasks | None,
        tasks: TaskLookup | None,
    ) -> None:
        self.memory = memory
        self.background = background
        self.tasks = tasks
        self._merging: asyncio.Task[None] | None = None
        self._repairing: asyncio.Task[str] | None = None
        self._repair_after = float("-inf")  # monotonic: no repair tried before then

    def prepare(self, agent: AgentConfig, focus: int | None) -> Prepared:
        """What a turn reads before it searches, in one thread hop: each hop costs the loop
        a submit and a wake-up, and 1,000 turns starting within a second paid four each.
        The recency fallback is read here too, after the index caught up: it is cached per
        index generation, so asking for it when hits make it unneeded costs a lookup. The
        catch-up and the recency read may fail (the turn goes on without them); the
        committed files and the task never do."""
        committed, task = read_committed_memory(agent), self._task(agent, focus)
        related = related_table(agent)
        synced: tuple[SyncReport, bool] | Exception
        try:
            synced = self._sync()
        except Exception as exc:
            synced = exc
        recent: list[Hit] | Exception
        try:
            recent = self.memory.recent(repo=agent.repo, limit=RECENCY_LIMIT)
        except Exception as exc:
            recent = exc
        return Prepared(committed, task, synced, recent, related)

    def _sync(self) -> tuple[SyncReport, bool]:
        report = self.memory.sync(limit=SYNC_ROWS_PER_TURN)
        return report, self.memory.merge_due()

    def merge_in_background(self) -> None:
        if self.background is None or (self._merging is not None and not self._merging.done()):
            return
        self._merging = self.background.spawn(
            asyncio.to_thread(self.memory.merge), name="memory-merge"
        )

    def repair_in_background(self) -> None:
        """Rebuild the index from the rows (`Memory.repair`), one rebuild at a time and at
        most once per REPAIR_RETRY_SECONDS; turns meanwhile answer without retrieval."""
        if self.background is None or (self._repairing is not None and not self._repairing.done()):
            return
        now = time.monotonic()
        if now < self._repair_after:
            return
        self._repair_after = now + REPAIR_RETRY_SECONDS
        self._repairing = self.background.spawn(
            asyncio.to_thread(self.memory.repair), name="memory-repair"
        )

    def _task(self, agent: AgentConfig, focus: int | None) -> FocusedTask | None:
        if self.tasks is None or focus is None:
            return None
        try:
            return self.tasks(agent, focus)
        except Exception as exc:
            log.warning("task lookup for #%s failed: %s", focus, reason_of(exc))
            return None
