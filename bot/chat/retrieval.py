"""Retrieve grounding for Chat turns (spec: Retrieve grounding), over `memory.search`.

Up to three rounds (docs/memory.md says what each asks and why), hits kept only at cosine
>= CHAT_FLOOR, injected as a `Prior Steelframe context:` block of untrusted data with
provenance; committed memory first; `(no semantic hits)` plus recent summaries when nothing
passes the floor; one widening when the draft cites nothing. A broken index or database
makes retrieval unavailable for the turn, never the turn fail.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from bot.background import BackgroundTasks
from bot.chat.grounding import NO_SEMANTIC_HITS, Emit, Grounding
from bot.chat.summary import SessionSummary, SummarySink
from bot.config import AgentConfig
from memory import ChunkError, ChunkIn, ChunkSource, Hit, Memory, add_chunk, read_committed
from memory.committed import CommittedMemory

log = logging.getLogger(__name__)

# The Chat floor (spec rule 2): a named constant, deliberately not a setting. Calibrated on
# tests/data/memory_quality.json: the right chunk scores >= 0.2 for every labelled query,
# the best match of an unrelated question 0.14 (tests/test_memory_quality.py holds both).
CHAT_FLOOR = 0.16
ROUNDS = 3
CHAT_K = 8  # hits injected per turn at most
WIDEN_K = 12  # after a draft that cites nothing, up to this many
EXPANSION_TERMS = 6
HIT_TEXT_CHARS = 1_200
RECENCY_LIMIT = 3
COMMITTED_BUDGET = 8_000
SYNC_ROWS_PER_TURN = 2_000  # a big backlog is caught up over several turns (or `reindex`)
HEADER = "Prior Steelframe context:"
TaskLookup = Callable[[AgentConfig, int], dict[str, Any] | None]


class RoundQuery(StrEnum):
    MESSAGE = "message"  # the operator's message, whole repository, focus lifted
    FOCUS = "focus"  # the message, only chunks about the focused issue/PR
    EXPANSION = "expansion"  # the message plus the distinctive words of the hits so far
    WIDEN = "widen"  # after an uncited draft: expansion, no focus, more hits
    RECENCY = "recency"  # not retrieval: the newest summaries, when nothing passed the floor


# New hits each round may add (CHAT_K caps the total): the focus round has its own share, so
# a focused issue's own history gets in even when the repository-wide round is full.
ROUND_K = {RoundQuery.MESSAGE: 6, RoundQuery.FOCUS: 3, RoundQuery.EXPANSION: 3}


class MemoryGrounder:
    def __init__(
        self,
        memory: Memory,
        *,
        background: BackgroundTasks | None = None,
        tasks: TaskLookup | None = None,
        floor: float = CHAT_FLOOR,
    ) -> None:
        self.memory = memory
        self.background = background
        self.tasks = tasks
        self.floor = floor
        self._merging: asyncio.Task[Any] | None = None

    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding:
        committed = await asyncio.to_thread(_committed, agent)
        base = Grounding(
            committed_memory=[f.to_json() for f in committed.files],
            committed_block=committed_block(committed),
            task=await asyncio.to_thread(self._task, agent, focus),
            meta={"floor": self.floor, "committed": _committed_meta(committed)},
        )
        try:
            report, merge_due = await asyncio.to_thread(self._sync)
            if merge_due:
                self._merge_in_background()
            hits, rounds = await self._rounds(query, agent, focus, emit)
        except Exception as exc:  # spec: retrieve errors never fail the turn
            reason = _reason(exc)
            log.warning("retrieval unavailable (agent %s): %s", agent.name, reason)
            await emit({"type": "status", "text": "retrieve unavailable", "reason": reason})
            return replace(
                base,
                available=False,
                prompt_block=f"{HEADER} (retrieval unavailable this turn)",
                meta={**base.meta, "retrieval": "unavailable", "reason": reason},
            )
        meta = {
            **base.meta,
            "rounds": rounds,
            "index": {"added": report.added, "behind": report.behind},
        }
        if hits:
            return replace(
                base, hits=hits, prompt_block=context_block(hits), meta={**meta, "retrieval": "ok"}
            )
        recent = await self._recent(agent)
        await emit(
            {
                "type": "status",
                "text": f"{NO_SEMANTIC_HITS} · "
                + _count(len(recent), "recent summary", "recent summaries"),
            }
        )
        return replace(
            base,
            hits=recent,
            recency_fallback=True,
            prompt_block=fallback_block(recent),
            meta={**meta, "retrieval": "recency fallback"},
        )

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding:
        kept = {hit["id"]: hit for hit in previous.kept_hits}
        started = time.perf_counter()
        found = await asyncio.to_thread(
            self._search, _expanded(query, kept.values()), agent, None, WIDEN_K, False
        )
        new = [hit for hit in found if hit.chunk_id not in kept][: max(0, WIDEN_K - len(kept))]
        added = await asyncio.to_thread(self._hits, new, RoundQuery.WIDEN)
        await emit(
            {
                "type": "status",
                "text": f"retrieve widen · {_count(len(added), 'new hit', 'new hits')}",
                "query": RoundQuery.WIDEN.value,
                "hits": len(added),
            }
        )
        hits = [*kept.values(), *added]
        widened = {"query": RoundQuery.WIDEN.value, "hits": len(added), "ms": _ms(started)}
        rounds = [*previous.meta.get("rounds", []), widened]
        return replace(
            previous,
            hits=hits,
            prompt_block=context_block(hits),
            meta={**previous.meta, "rounds": rounds},
        )

    def cites(self, reply: str, grounding: Grounding) -> bool:
        """Does the reply cite a kept hit: its #issue, its session id (or the first 8
        characters of it), or one of its distinctive words?"""
        lowered = reply.lower()
        for hit in grounding.kept_hits:
            issue = hit.get("issue")
            if issue and re.search(rf"#{int(issue)}(?!\d)", reply):
                return True
            session = hit.get("session_id")
            if session and (session in reply or (len(session) >= 8 and session[:8] in reply)):
                return True
            for word in hit.get("distinctive", []):
                if re.search(rf"\b{re.escape(word)}\b", lowered):
                    return True
        return False

    # -- rounds --------------------------------------------------------------------------

    async def _rounds(
        self, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        kept: dict[int, dict[str, Any]] = {}
        rounds: list[dict[str, Any]] = []
        for kind in (RoundQuery.MESSAGE, RoundQuery.FOCUS, RoundQuery.EXPANSION):
            room = min(ROUND_K[kind], CHAT_K - len(kept))
            if room <= 0 or (kind is RoundQuery.FOCUS and focus is None):
                continue
            if kind is RoundQuery.EXPANSION and not kept:
                continue
            started = time.perf_counter()
            text = _expanded(query, kept.values()) if kind is RoundQuery.EXPANSION else query
            found = await asyncio.to_thread(
                self._search, text, agent, focus, room + len(kept), kind is RoundQuery.FOCUS
            )
            new = [hit for hit in found if hit.chunk_id not in kept][:room]
            for hit in await asyncio.to_thread(self._hits, new, kind):
                kept[hit["id"]] = hit
            number = len(rounds) + 1
            rounds.append(
                {"round": number, "query": kind.value, "hits": len(new), "ms": _ms(started)}
            )
            await emit(
                {
                    "type": "status",
                    "text": f"retrieve {number}/{ROUNDS} · {_count(len(new), 'hit', 'hits')}",
                    "round": number,
                    "rounds": ROUNDS,
                    "query": kind.value,
                    "hits": len(new),
                }
            )
        return list(kept.values()), rounds

    def _search(
        self, text: str, agent: AgentConfig, focus: int | None, k: int, focus_only: bool
    ) -> list[Hit]:
        return self.memory.search(
            text, repo=agent.repo, focus=focus, k=k, floor=self.floor, focus_only=focus_only
        )

    def _hits(self, hits: list[Hit], kind: RoundQuery) -> list[dict[str, Any]]:
        return [
            {
                **hit.to_json(text_limit=HIT_TEXT_CHARS),
                "round": kind.value,
                "distinctive": self.memory.distinctive(hit.record.text),
            }
            for hit in hits
        ]

    async def _recent(self, agent: AgentConfig) -> list[dict[str, Any]]:
        try:
            hits = await asyncio.to_thread(self.memory.recent, repo=agent.repo, limit=RECENCY_LIMIT)
        except Exception as exc:
            log.warning("recent summaries unavailable: %s", _reason(exc))
            return []
        return [
            {
                **hit.to_json(text_limit=HIT_TEXT_CHARS),
                "score": None,
                "round": RoundQuery.RECENCY.value,
            }
            for hit in hits
        ]

    def _sync(self) -> tuple[Any, bool]:
        report = self.memory.sync(limit=SYNC_ROWS_PER_TURN)
        return report, self.memory.merge_due()

    def _merge_in_background(self) -> None:
        if self.background is None or (self._merging is not None and not self._merging.done()):
            return
        self._merging = self.background.spawn(
            asyncio.to_thread(self.memory.merge), name="memory-merge"
        )

    def _task(self, agent: AgentConfig, focus: int | None) -> dict[str, Any] | None:
        if self.tasks is None or focus is None:
            return None
        try:
            return self.tasks(agent, focus)
        except Exception as exc:
            log.warning("task lookup for #%s failed: %s", focus, _reason(exc))
            return None


# -- prompt blocks ---------------------------------------------------------------------


def untrusted(text: str, **provenance: Any) -> str:
    """Wrap external text as data with its provenance; the text cannot close the wrapper."""
    attributes = " ".join(
        f'{name}="{html.escape(str(value), quote=True)}"'
        for name, value in provenance.items()
        if value not in (None, "", [], ())
    )
    body = re.sub(r"<(/?)(untrusted-data)", r"&lt;\1\2", text, flags=re.IGNORECASE)
    return f"<untrusted-data {attributes}>\n{body}\n</untrusted-data>"


def _hit_block(hit: dict[str, Any]) -> str:
    return untrusted(
        hit["text"],
        source=hit["source"],
        chunk=hit["id"],
        score=hit.get("score"),
        issue=hit.get("issue"),
        session=hit.get("session_id"),
        paths=", ".join(hit.get("paths") or []),
        created=hit.get("created_at"),
    )


def context_block(hits: list[dict[str, Any]]) -> str:
    return "\n".join([HEADER, *(_hit_block(hit) for hit in hits)])


def fallback_block(recent: list[dict[str, Any]]) -> str:
    """Spec rule 3: say there were no semantic hits, never pass recency off as retrieval."""
    lines = [HEADER, NO_SEMANTIC_HITS]
    if recent:
        lines.append("Most recent session summaries (by recency, not relevance):")
        lines.extend(_hit_block(hit) for hit in recent)
    return "\n".join(lines)


def committed_block(committed: CommittedMemory) -> str:
    parts = [untrusted(f.text, source="committed_memory", path=f.path) for f in committed.files]
    if committed.omitted:
        parts.append(f"(omitted for size: {', '.join(committed.omitted)})")
    return "\n".join(parts)


def _committed(agent: AgentConfig) -> CommittedMemory:
    try:
        return read_committed(agent.checkout, budget=COMMITTED_BUDGET)
    except OSError as exc:
        log.warning("committed memory unreadable for agent %s: %s", agent.name, _reason(exc))
        return CommittedMemory()


def _committed_meta(committed: CommittedMemory) -> dict[str, Any]:
    return {
        "files": [f.path for f in committed.files],
        "truncated": [f.path for f in committed.files if f.truncated],
        "omitted": committed.omitted,
        "skipped": committed.skipped,
    }


def _expanded(query: str, hits: Any) -> str:
    words: list[str] = []
    for hit in hits:
        for word in hit.get("distinctive", [])[:2]:
            if word not in words:
                words.append(word)
    return " ".join([query, *words[:EXPANSION_TERMS]])


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _reason(exc: Exception) -> str:
    """The error's class and first line (no tracebacks or payloads in metadata and logs)."""
    text = str(getattr(exc, "message", None) or exc)
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:200] if first else type(exc).__name__


# -- the chat summary sink -------------------------------------------------------------


def chat_summary_sink(agents: Mapping[str, AgentConfig]) -> SummarySink:
    """Store each closed chat session's summary as a `chat_summary` chunk (same transaction
    as the summary; the key makes a re-run replace rather than duplicate it)."""

    def sink(session: Session, summary: SessionSummary) -> None:
        agent = agents.get(summary.agent)
        if agent is None:
            log.warning(
                "summary of session %s: agent %s is gone", summary.session_id, summary.agent
            )
            return
        chunk = ChunkIn(
            text=summary.text,
            source=ChunkSource.CHAT_SUMMARY,
            repo=agent.repo,
            issue=summary.focus,
            session_id=summary.session_id,
            key=f"chat_summary:{summary.session_id}",
        )
        try:
            add_chunk(session, chunk)
        except ChunkError as exc:
            log.warning(
                "summary of session %s not stored in memory: %s", summary.session_id, exc.message
            )

    return sink
