"""The operator's explicit filing from Chat (the TUI's `y`, the GUI's File button,
`POST /api/operator/chat/file`): the session's pending proposal, or a title the operator
gave, filed once per key; the session keeps a "Filed as #N" message, so its history shows
the filing after a reload as it shows one a turn made. Knows nothing of HTTP."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.agents import resolve_agent
from bot.chat.proposals import Proposal, clear_pending, take_pending
from bot.chat.session_rows import active_session, operator_row
from bot.chat.session_views import agent_of
from bot.clock import Clock, utcnow
from bot.config import AgentConfig
from bot.contracts.errors import ErrorDetail
from bot.contracts.turn_meta import TurnMeta
from bot.db import Database
from bot.dialogue.titles import issue_title
from bot.errors import BadRequest, Unavailable
from bot.filing import FiledIssue, FilingKind, FilingService, filing_key
from bot.models import ChatSession, ChatTurn, Role

FILED_KIND = "filed"  # the stored note's meta `kind`


@dataclass(frozen=True)
class FileRequest:
    """What the operator asked to file: the pending proposal of `session_id` (or of the
    active session), or, with a title, that title and body."""

    operator_id: int
    session_id: str | None
    title: str | None
    body: str | None


@dataclass(frozen=True)
class ChatFiling:
    """An issue filed (or found filed under the same key) and the session that notes it
    (None: the operator has no session to note it in)."""

    filed: FiledIssue
    session_id: str | None


@dataclass(frozen=True)
class _Plan:
    key: str
    kind: FilingKind
    title: str
    body: str
    session_id: str | None
    proposal: Proposal | None


async def file_from_chat(
    request: FileRequest,
    *,
    db: Database,
    filing: FilingService | None,
    agents: dict[str, AgentConfig],
    clock: Clock = utcnow,
) -> ChatFiling:
    """File, then note it in the session (and clear the proposal filed) in one transaction.
    A repeat under the same key files nothing more and notes nothing twice."""
    plan = await db.run(_plan, request)
    if filing is None:
        raise Unavailable("the GitHub App is not configured: nothing can be filed")
    agent = await db.run(agent_of, request.operator_id, plan.session_id)
    filed = await filing.file(
        key=plan.key,
        repo=resolve_agent(agents, agent).repo,  # a session's agent gone: an error, no guess
        title=plan.title,
        body=plan.body or f"Filed from Steelframe Chat by the operator:\n\n{plan.title}",
        kind=plan.kind,
        origin_session=plan.session_id,
    )
    if plan.session_id is None:
        return ChatFiling(filed, None)
    noted = await db.run(_note_filed, request.operator_id, plan, filed, clock)
    return ChatFiling(filed, plan.session_id if noted else None)


def _plan(session: Session, request: FileRequest) -> _Plan:
    """The proposal to file (a given title files that title instead), and its key."""
    title = request.title if request.title and request.title.strip() else None
    held = take_pending(session, request.operator_id, session_id=request.session_id)
    if title is None:
        if held is None:
            raise BadRequest(
                "nothing to file: no pending proposal and no title",
                detail=ErrorDetail(field="title"),
            )
        held_in, proposal = held
        # The proposal's own key: a confirmation in words or a second click files no more.
        body = request.body if request.body is not None else proposal.body
        kind = FilingKind(proposal.kind)
        return _Plan(proposal.key, kind, proposal.title, body, held_in, proposal)
    sid = request.session_id
    # Keyed by the title the issue gets (bot.dialogue.titles.issue_title): a retry that trims
    # or spaces it differently is the same filing, not a second issue so titled.
    key = filing_key("explicit", request.operator_id, sid, issue_title(title))
    if sid is None:  # noted in the active session, if there is one
        active = active_session(session, operator_row(session, request.operator_id))
        sid = active.id if active is not None else None
    return _Plan(key, FilingKind.WORK, title, request.body or "", sid, None)


def filed_note_id(key: str) -> str:
    """The note's message id, one per filing key: a repeat writes no second note."""
    return "filed-" + hashlib.sha256(key.encode()).hexdigest()[:40]


def _note_filed(
    session: Session, operator_id: int, plan: _Plan, filed: FiledIssue, clock: Clock
) -> bool:
    """The session's "Filed as #N" message, and the filed proposal cleared (a newer one
    held meanwhile stays); False when the session is gone or the note was written before."""
    chat = session.get(ChatSession, plan.session_id, with_for_update=True)
    if chat is None or chat.operator_id != operator_id:
        return False
    if plan.proposal is not None:
        clear_pending(session, operator_id, chat.id, plan.proposal.key)
    ident = filed_note_id(plan.key)
    if session.get(ChatTurn, ident) is not None:
        return plan.proposal is not None
    now = clock()
    seq = session.scalar(select(func.max(ChatTurn.seq)).where(ChatTurn.session_id == chat.id))
    meta: TurnMeta = {
        "kind": FILED_KIND,
        "issue": filed.number,
        "filed": {"number": filed.number, "url": filed.url, "task_started": filed.task_started},
    }
    session.add(
        ChatTurn(
            id=ident,
            session_id=chat.id,
            seq=(seq or 0) + 1,
            role=Role.ASSISTANT,
            content=f"Filed as #{filed.number}: {filed.url}",
            intent=f"file_{plan.kind.value}",  # as a turn that filed says
            meta=meta,
            created_at=now,
        )
    )
    chat.last_activity_at = now
    session.flush()
    return True
