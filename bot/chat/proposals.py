"""The filing proposal a session holds until the operator confirms it (a message, `y`, a
button or the API files it once), declines it or a newer one replaces it; and the Decision
draft a publish clears."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update
from sqlalchemy.orm import Session

from bot.chat.session_rows import active_session, operator_row, owned_session
from bot.contracts.chat import (
    PendingProposal,
)
from bot.models import ChatSession


@dataclass(frozen=True)
class Proposal:
    """Work or a memory the model proposed and the operator has not confirmed yet. `key` is
    its filing key: confirmed by a message, `y`, a button or the API, it files one issue."""

    title: str
    body: str
    kind: str  # bot.filing.FilingKind value
    key: str

    def as_json(self) -> dict[str, str]:
        """As the turn's stored metadata keeps it."""
        return {"title": self.title, "body": self.body, "kind": self.kind}

    def view(self) -> PendingProposal:
        return PendingProposal(title=self.title, body=self.body, kind=self.kind)


def proposal_of(row: ChatSession) -> Proposal | None:
    if not row.pending_title:
        return None
    return Proposal(
        title=row.pending_title,
        body=row.pending_body or "",
        kind=row.pending_kind or "work",
        key=row.pending_key or f"proposal:{row.id}:{row.pending_title}"[:64],
    )


def set_pending(row: ChatSession, proposal: Proposal | None) -> None:
    """Hold a new proposal (replacing the last one), or clear it with None."""
    row.pending_title = proposal.title if proposal else None
    row.pending_body = proposal.body if proposal else None
    row.pending_kind = proposal.kind if proposal else None
    row.pending_key = proposal.key if proposal else None


@dataclass(frozen=True)
class AnsweredDraft:
    """The Decision draft a publish answers: its session, and its version when the publish
    began."""

    session_id: str
    version: int


def draft_answered(
    session: Session, operator_id: int, *, session_id: str | None, issue: int
) -> AnsweredDraft | None:
    """The draft a publish on `issue` answers: the named session's, else the active
    session's, when it is a draft for that issue."""
    if session_id is not None:
        row: ChatSession | None = owned_session(session, operator_id, session_id)
    else:
        row = active_session(session, operator_row(session, operator_id))
    if row is None or not row.decision_body or row.decision_issue != issue:
        return None
    return AnsweredDraft(row.id, row.decision_version)


def decision_published(session: Session, operator_id: int, answered: AnsweredDraft) -> bool:
    """Publish succeeded: clear the draft it answered (spec: the draft clears on Publish
    success). A draft a turn wrote while the comment was being posted has a newer version
    and stays; the compare-and-set needs no lock. False when nothing was cleared."""
    cleared = session.connection().execute(
        update(ChatSession)
        .where(
            ChatSession.id == answered.session_id,
            ChatSession.operator_id == operator_id,
            ChatSession.decision_version == answered.version,
        )
        .values(
            decision_body=None,
            decision_issue=None,
            decision_version=ChatSession.decision_version + 1,
        )
    )
    return bool(cleared.rowcount)


def take_pending(
    session: Session, operator_id: int, *, session_id: str | None
) -> tuple[str, Proposal] | None:
    """(session id, proposal) of the named or active session's pending proposal, if any."""
    if session_id is not None:
        row: ChatSession | None = owned_session(session, operator_id, session_id)
    else:
        row = active_session(session, operator_row(session, operator_id))
    if row is None:
        return None
    proposal = proposal_of(row)
    return (row.id, proposal) if proposal is not None else None


def clear_pending(session: Session, operator_id: int, session_id: str, key: str) -> None:
    """Clear the proposal that was filed (a newer one held meanwhile stays)."""
    row = owned_session(session, operator_id, session_id)
    proposal = proposal_of(row)
    if proposal is not None and proposal.key == key:
        set_pending(row, None)
