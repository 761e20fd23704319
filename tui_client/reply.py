"""What a finished reply shows under its text, from either of its two sources: a turn's
`done` response (`ChatResponse`) or, when a session is reopened, a stored message and the
keys of its `meta` the TUI reads (`TurnMeta`); both generated in `sessions_wire.py`.

A stored message may be years older than the service: its metadata was written by whatever
version answered it, so a hit or a filing stored there is read key by key, and a key it
lacks is shown as absent rather than refusing the session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui_client.sessions_wire import ChatResponse, Message, RetrievedHit


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk as its line in the hits row reads it."""

    source: str
    score: float | None = None
    issue: int | None = None
    session_id: str | None = None
    preview: str = ""

    @classmethod
    def of(cls, hit: RetrievedHit) -> Hit:
        return cls(hit.source, hit.score, hit.issue, hit.session_id, hit.preview or hit.text)

    @classmethod
    def stored(cls, hit: dict[str, Any]) -> Hit:
        """A hit as a message's `meta.retrieved` holds it (the service declares it any JSON
        object: `RetrievedHit` as JSON, with the keys of the version that stored it)."""
        score = hit.get("score")
        issue, session = hit.get("issue"), hit.get("session_id")
        return cls(
            source=str(hit.get("source") or "memory"),
            score=float(score) if isinstance(score, int | float) else None,
            issue=issue if isinstance(issue, int) else None,
            session_id=str(session) if session else None,
            preview=str(hit.get("preview") or hit.get("text") or ""),
        )


@dataclass(frozen=True)
class Filed:
    """The GitHub issue a turn filed."""

    number: int
    url: str
    task_started: bool


@dataclass(frozen=True)
class FinishedReply:
    text: str
    reasoning: str = ""
    hits: list[Hit] = field(default_factory=list)
    hit_count: int = 0  # semantic hits given to the model (0 with a recency fallback)
    memory_verdict: str | None = None
    notes: list[str] = field(default_factory=list)
    filed: Filed | None = None

    @classmethod
    def of(cls, response: ChatResponse) -> FinishedReply:
        number = response.filed_issue_number
        filed = None
        if number:
            filed = Filed(number, response.filed_issue_url or "", response.filed_task_started)
        return cls(
            text=response.reply,
            reasoning=response.reasoning,
            hits=[Hit.of(hit) for hit in response.retrieved],
            hit_count=response.retrieve_hits,
            memory_verdict=response.memory_verdict,
            notes=list(response.notes),
            filed=filed,
        )

    @classmethod
    def stored(cls, message: Message) -> FinishedReply:
        """A stored assistant message, for a reopened session."""
        meta = message.meta or {}
        filed = meta.get("filed") or {}
        number = filed.get("number")
        return cls(
            text=message.content,
            reasoning=message.reasoning or "",
            hits=[Hit.stored(hit) for hit in meta.get("retrieved") or []],
            hit_count=meta.get("retrieve_hits") or 0,
            memory_verdict=meta.get("memory_verdict"),
            notes=list(meta.get("notes") or []),
            filed=(
                Filed(number, str(filed.get("url") or ""), bool(filed.get("task_started")))
                if isinstance(number, int) and number
                else None
            ),
        )
