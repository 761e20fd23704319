"""The vocabulary of a turn's retrieval: the Chat floor and the other numbers it is tuned by,
the rounds, a hit's strength, what the rounds of one turn have kept (`RetrievalTurn`) and
how hits are picked from a round's results."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from bot.config import AgentConfig
from bot.contracts.hits import RetrievedHit, RoundQuery, Strength
from bot.contracts.turn_meta import RoundMeta
from memory import Hit
from memory.segment import Record

__all__ = ["RetrievedHit", "RoundQuery", "Strength"]  # declared with the hit (bot.contracts)

# The Chat floor (spec rule 2): a named constant, deliberately not a setting. A kept hit's
# cosine with its round's query is at least this. Calibrated on tests/data/grounding_set.json
# (tests/test_grounding_quality.py holds the numbers; docs/memory.md shows the distribution).
CHAT_FLOOR = 0.12
# ...and at least this share of the round's best score: a long tail of one-word matches
# under a good hit is noise, not context.
RELATIVE_MARGIN = 0.45
# A hit is "strong" when its cosine with the whole question (words the index has never seen
# included) reaches this; below it the hit is labelled weak in the prompt and the response.
# No question of the labelled set that memory cannot answer reaches it.
STRONG_SCORE = 0.3
ROUNDS = 3
FOCUS_THREAD_LIMIT = 500  # chunks of a focused thread read to find what a question asks for
CHAT_K = 8  # semantic hits injected per turn at most (focus context comes on top)
CONTEXT_K = 3  # focus context: the issue's own text and up to two closing pull requests
THREAD_RECENT = 2  # ...and, in a Discuss session, its newest chunks if the question matches few
WIDEN_K = 12  # after a draft that cites nothing, up to this many
HIT_TEXT_CHARS = 1_200
RECENCY_LIMIT = 3


# New hits each round may add (CHAT_K caps the total).
ROUND_K = {RoundQuery.MESSAGE: 6, RoundQuery.FOCUS: 3, RoundQuery.LINKS: 3}
EXPANSION_K = 3


@dataclass
class RetrievalTurn:
    """What the rounds of one turn have kept so far."""

    query: str
    agent: AgentConfig
    focus: int | None
    hits: dict[int, RetrievedHit]
    rounds: list[RoundMeta]
    related: tuple[str, ...] = ()  # the repository's committed `related:` table
    words: tuple[str, ...] = ()  # search words the model proposed (bot.chat.search_words)
    lexical: tuple[int, ...] = ()  # round 1's ranking, chunk ids best first (bot.chat.hybrid)

    @property
    def searched(self) -> str:
        """What rounds 2 and 3 search with: the question and the model's words."""
        return " ".join([self.query, *self.words])

    @property
    def semantic(self) -> list[RetrievedHit]:
        return [h for h in self.hits.values() if not h.is_context]


def select_hits(
    hits: Iterable[Hit],
    room: int,
    floor: float,
    *,
    margin: float = RELATIVE_MARGIN,
    best: float | None = None,
) -> list[Hit]:
    """Hits at or above the floor and within `margin` of the best score, at most `room`."""
    ranked = list(hits)
    if room <= 0 or not ranked:
        return []
    top = best if best is not None else max(h.score for h in ranked)
    bar = max(floor, margin * top)
    return [h for h in ranked if h.score >= bar][:room]


def strong_hits(turn: RetrievalTurn) -> list[RetrievedHit]:
    """The turn's strong hits, best first."""
    return sorted(
        (h for h in turn.semantic if h.strength == Strength.STRONG), key=lambda h: -score_of(h)
    )


def score_of(hit: RetrievedHit) -> float:
    """A kept hit's cosine (a recency summary, never kept, has none: 0)."""
    return hit.score or 0.0


def new_hits(hits: list[Hit], turn: RetrievalTurn) -> list[Hit]:
    return [h for h in hits if h.chunk_id not in turn.hits]


def record_of(hit: RetrievedHit) -> Record:
    return Record(
        id=hit.id, source=hit.source, repo=hit.repo, text=hit.text, issue=hit.issue, paths=hit.paths
    )


def retrieved(hit: Hit, kind: RoundQuery) -> RetrievedHit:
    """A found chunk as a turn keeps it (its text cut to HIT_TEXT_CHARS), before the round
    says how strong it is; a recency summary has no score (found by age, not cosine)."""
    record = hit.record
    return RetrievedHit(
        id=record.id,
        source=record.source,
        score=None if kind is RoundQuery.RECENCY else round(hit.score, 4),
        coverage=round(hit.coverage, 4),
        repo=record.repo,
        issue=record.issue,
        session_id=record.session_id,
        paths=record.paths,
        created_at=record.created_at,
        links=record.links,
        preview=hit.preview,
        text=hit.text_within(HIT_TEXT_CHARS),
        round=kind,
    )


def count_of(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def reason_of(exc: Exception) -> str:
    """The error's class and first line (no tracebacks or payloads in metadata and logs)."""
    text = str(getattr(exc, "message", None) or exc)
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:200] if first else type(exc).__name__
