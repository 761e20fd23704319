"""A Chat turn's retrieval hit, declared once: what the grounder keeps, the ordering, the
verdict and the prompt read, and what the turn's response and metadata carry.

Its JSON keys keep the order of its fields; the fields a hit was never given (a recency
summary has no strength, a chunk outside any issue no thread) are `UNSET` and left out, so
the bytes in `retrieved` are the ones the clients have always read (docs/api.md). This
module imports nothing of ours: every layer may use it.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec
from msgspec import UNSET, Struct, UnsetType


class RoundQuery(StrEnum):
    MESSAGE = "message"  # the operator's message, whole repository, focus lifted
    FOCUS = "focus"  # the focused issue's text and closing PRs (context), hits about them
    LINKS = "links"  # without a focus: the PRs closing the issues found, the issues closed
    EXPANSION = "expansion"  # pseudo-relevance feedback from the hits so far
    MODEL = "model"  # the question with the search words the model proposed
    DENSE = "dense"  # hybrid ranking: dense vectors fused with the message round's ranking
    WIDEN = "widen"  # after an uncited draft: feedback from every hit, no focus, more hits
    RECENCY = "recency"  # not retrieval: the newest summaries, when nothing is kept


class Strength(StrEnum):
    STRONG = "strong"
    WEAK = "weak"
    CONTEXT = "context"  # focus context: given, not found


class RetrievedHit(Struct, frozen=True, forbid_unknown_fields=True):
    """One chunk a turn kept (or, in the recency fallback, one of the newest summaries)."""

    id: int  # the chunk id
    source: str  # memory.ChunkSource value: issue, pull_request, comment, summary...
    score: float | None  # cosine with the round's query (None: a recency summary)
    coverage: float  # share of the round's query weight the index knows
    repo: str
    issue: int | None
    session_id: str | None
    paths: tuple[str, ...]
    created_at: str | None
    links: tuple[int, ...]  # issues this pull request closes (`Fixes #12`)
    preview: str  # the text on one line, cut to memory.index.PREVIEW_CHARS
    text: str  # the text, cut to bot.chat.retrieval_hits.HIT_TEXT_CHARS
    round: RoundQuery  # the round that kept it
    # Its rare terms (memory.feedback.rare_terms): what a reply that used it would repeat.
    distinctive: tuple[str, ...] | UnsetType = UNSET
    strength: Strength | UnsetType = UNSET
    question_score: float | UnsetType = UNSET  # cosine with the whole question
    matched: float | UnsetType = UNSET  # share of the round's query it contains
    # The issue whose thread it belongs to (bot.chat.ordering.thread_key); chunks with an
    # issue only.
    thread: int | UnsetType = UNSET

    @property
    def is_context(self) -> bool:
        return self.strength == Strength.CONTEXT

    def to_json(self) -> dict[str, object]:
        """The JSON object stored in a turn's metadata (the same keys as on the wire)."""
        built: dict[str, object] = msgspec.to_builtins(self)
        return built


def hits_json(hits: list[RetrievedHit]) -> list[dict[str, object]]:
    return [hit.to_json() for hit in hits]
