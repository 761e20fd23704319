"""The retrieved-context blocks of the system prompt: hits and focus context as untrusted
data with provenance, weak hits labelled, committed memory, the recency fallback."""

from __future__ import annotations

import html
import re

from msgspec import UnsetType

from bot.chat.grounding import NO_SEMANTIC_HITS
from bot.contracts.hits import RetrievedHit, Strength
from bot.dialogue import NOTHING_ANSWERS
from memory.committed import CommittedMemory

HEADER = "Prior Steelframe context:"
WEAK_NOTE = (
    'Hits marked strength="weak" match the question only loosely: use one only if it really'
    " answers the question, and say the answer is uncertain."
)
CONTEXT_NOTE = (
    'Blocks marked strength="context" are the focused issue\'s own text and the pull requests'
    " that close it, given whatever the question."
)


def untrusted(text: str, **provenance: object) -> str:
    """Wrap external text as data with its provenance; the text cannot close the wrapper."""
    attributes = " ".join(
        f'{name}="{html.escape(str(value), quote=True)}"'
        for name, value in provenance.items()
        if value not in (None, "", [], ())
    )
    body = re.sub(r"<(/?)(untrusted-data)", r"&lt;\1\2", text, flags=re.IGNORECASE)
    return f"<untrusted-data {attributes}>\n{body}\n</untrusted-data>"


def hit_block(hit: RetrievedHit) -> str:
    return untrusted(
        hit.text,
        source=hit.source,
        chunk=hit.id,
        score=hit.score,
        strength=None if isinstance(hit.strength, UnsetType) else hit.strength.value,
        issue=hit.issue,
        closes=", ".join(f"#{n}" for n in hit.links),
        session=hit.session_id,
        paths=", ".join(hit.paths),
        created=hit.created_at,
    )


NOTHING_NOTE = (
    f"{NOTHING_ANSWERS}: none of the blocks below answers the question (they hold too little"
    " of its words). Say so first, in those words; then, if useful, list them apart as"
    ' "closest, not an answer". Do not answer from them.'
)


def context_block(hits: list[RetrievedHit], *, answers: bool = True) -> str:
    """The hits as untrusted data; with `answers` False (the turn's verdict: memory has
    nothing that answers the question) they are announced as the closest, not an answer."""
    notes = [] if answers else [NOTHING_NOTE]
    if any(hit.strength == Strength.WEAK for hit in hits):
        notes.append(WEAK_NOTE)
    if any(hit.is_context for hit in hits):
        notes.append(CONTEXT_NOTE)
    return "\n".join([HEADER, *notes, *(hit_block(hit) for hit in hits)])


def fallback_block(recent: list[RetrievedHit]) -> str:
    """Spec rule 3: say there were no semantic hits, never pass recency off as retrieval."""
    lines = [HEADER, NO_SEMANTIC_HITS, f"{NOTHING_ANSWERS}: say so first, in those words."]
    if recent:
        lines.append("Most recent session summaries (by recency, not relevance):")
        lines.extend(hit_block(hit) for hit in recent)
    return "\n".join(lines)


def committed_block(committed: CommittedMemory) -> str:
    parts = [untrusted(f.text, source="committed_memory", path=f.path) for f in committed.files]
    if committed.omitted:
        parts.append(f"(omitted for size: {', '.join(committed.omitted)})")
    return "\n".join(parts)
