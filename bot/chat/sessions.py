"""Chat sessions and their turns: the storage side of Chat, free of HTTP.

Every function takes an open SQLAlchemy `Session` and the operator's id; a session id that
belongs to another operator is NotFound, exactly as if it did not exist.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    BindParameter,
    Select,
    Update,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from bot.chat.summary import mark_left
from bot.clock import Clock, utcnow
from bot.contracts.chat import (
    Cleared,
    History,
    Message,
    PendingProposal,
    SessionDecision,
    SessionSummary,
)
from bot.contracts.chat import Session as SessionView
from bot.errors import NotFound
from bot.models import ChatSession, ChatTurn, Operator, Role, SessionKind, SummaryStatus

REASONING_CAP = 12_000
HISTORY_IN_RESPONSE = 20
PROMPT_HISTORY_TURNS = 40
UNSET: Any = object()
View = TypeVar("View", bound=SessionSummary)


class SessionGone(Exception):
    """The session was deleted while a turn was running; the turn must write nothing."""


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


@dataclass
class TurnSession:
    """What the turn pipeline needs to know about its session, read in one transaction."""

    id: str
    agent: str
    title: str | None
    focus: int | None
    kind: str
    decision_body: str | None
    decision_issue: int | None
    history: list[Message] = field(default_factory=list)
    created: bool = False
    pending: Proposal | None = None


def new_id() -> str:
    return uuid.uuid4().hex


def _owned(session: Session, operator_id: int, session_id: str) -> ChatSession:
    row = session.get(ChatSession, session_id)
    if row is None or row.operator_id != operator_id:
        raise NotFound(f"session {session_id} not found")
    return row


def _operator(session: Session, operator_id: int) -> Operator:
    operator = session.get(Operator, operator_id)
    if operator is None:
        raise NotFound("operator not found")
    return operator


def _active(session: Session, operator: Operator) -> ChatSession | None:
    if operator.active_session_id is None:
        return None
    row = session.get(ChatSession, operator.active_session_id)
    if row is None or row.operator_id != operator.id:
        return None
    return row


def _create(
    session: Session,
    operator: Operator,
    *,
    agent: str,
    title: str | None = None,
    focus: int | None = None,
    kind: SessionKind = SessionKind.CHAT,
    clock: Clock = utcnow,
) -> ChatSession:
    row = _new_row(operator.id, agent=agent, title=title, focus=focus, kind=kind, clock=clock)
    session.add(row)
    operator.active_session_id = row.id
    session.flush()
    return row


def _new_row(
    operator_id: int,
    *,
    agent: str,
    title: str | None = None,
    focus: int | None = None,
    kind: SessionKind = SessionKind.CHAT,
    clock: Clock = utcnow,
    session_id: str | None = None,
) -> ChatSession:
    now = clock()
    return ChatSession(
        id=session_id or new_id(),
        operator_id=operator_id,
        agent=agent,
        kind=kind,
        title=title,
        focus_issue=focus,
        created_at=now,
        last_activity_at=now,
        summary_status=SummaryStatus.NONE,
    )


def clear_decision(row: ChatSession) -> None:
    row.decision_body = None
    row.decision_issue = None


@dataclass(frozen=True)
class TurnTarget:
    """Where a message goes, decided by a read before the turn's stream opens (so a session
    or agent that is wrong is still a plain 4xx); `open_for_turn` writes it once the turn's
    first frame is out."""

    session_id: str
    agent: str  # the agent the turn runs with (a switch, else the session's)
    exists: bool  # False: `open_for_turn` creates the session under `session_id`
    pin: bool  # a named session becomes the operator's active one
    switch_agent: str | None = None
    focus: Any = UNSET  # int, None (clear focus) or UNSET (keep)


# A turn's question before its first frame: (operator, the session it names, or None for
# the operator's active one).
TurnKey = tuple[int, str | None]


@dataclass(frozen=True)
class Placement:
    """Where a turn's key points: the session (None: there is none) and its agent."""

    session_id: str | None
    agent: str | None


def resolve_turn(
    session: Session,
    operator_id: int,
    *,
    session_id: str | None,
    agent: str | None,
    focus: int | Any | None = UNSET,
    default_agent: str,
) -> TurnTarget:
    """The session a message goes to: the named one (pinned from now on), else the
    operator's active one, else a new one (its id chosen now). Reads only."""
    key = (operator_id, session_id)
    return place_turn(
        placements(session, [key]).get(key),
        session_id=session_id,
        agent=agent,
        focus=focus,
        default_agent=default_agent,
    )


def placements(session: Session, keys: Sequence[TurnKey]) -> dict[TurnKey, Placement]:
    """Where each key points, for a batch of turns (bot.group_read: every turn waits on this
    for its first frame, and 1,000 may start within a second): at most two Core SELECTs of
    the operators beside their sessions. A key whose operator does not exist is left out."""
    found: dict[TurnKey, Placement] = {}
    connection = session.connection()
    active = sorted({operator for operator, named in keys if named is None})
    if active:
        for row in connection.execute(_ACTIVE_PLACEMENTS, {"operators": active}):
            found[(row.id, None)] = Placement(row.session_id, row.agent)
    named = {(operator, name) for operator, name in keys if name is not None}
    if named:
        rows = connection.execute(
            _NAMED_PLACEMENTS,
            {
                "operators": sorted({operator for operator, _ in named}),
                "sessions": sorted({name for _, name in named if name is not None}),
            },
        )
        operators = set()
        for row in rows:
            operators.add(row.id)
            if (row.id, row.session_id) in named:
                found[(row.id, row.session_id)] = Placement(row.session_id, row.agent)
        for key in named:
            if key[0] in operators:
                found.setdefault(key, Placement(None, None))
    return found


def place_turn(
    found: Placement | None,
    *,
    session_id: str | None,
    agent: str | None,
    focus: int | Any | None = UNSET,
    default_agent: str,
) -> TurnTarget:
    """The turn's target from where its key pointed (`placements`); NotFound for an operator
    that does not exist or a named session that is not the operator's."""
    if found is None:
        raise NotFound("operator not found")
    named = session_id is not None
    if found.session_id is None:
        if named:
            raise NotFound(f"session {session_id} not found")
        return TurnTarget(new_id(), agent or default_agent, exists=False, pin=False, focus=focus)
    return TurnTarget(
        found.session_id,
        agent or found.agent or default_agent,
        exists=True,
        pin=named,
        switch_agent=agent,
        focus=focus,
    )


def _placements(session_matches: Any) -> Select[int, str, str]:
    """Operators beside the sessions a turn would go to (NULLs when there is none); a
    session of another operator never matches."""
    return (
        select(Operator.id, ChatSession.id.label("session_id"), ChatSession.agent)
        .select_from(Operator)
        .outerjoin(ChatSession, and_(session_matches, ChatSession.operator_id == Operator.id))
        .where(Operator.id.in_(bindparam("operators", expanding=True)))
    )


_NAMED_PLACEMENTS = _placements(ChatSession.id.in_(bindparam("sessions", expanding=True)))
_ACTIVE_PLACEMENTS = _placements(ChatSession.id == Operator.active_session_id)


def open_for_turn(
    session: Session, operator_id: int, target: TurnTarget, *, clock: Clock = utcnow
) -> TurnSession:
    """Write what `resolve_turn` decided: create or pin the session, apply an agent switch or
    focus change (either clears the Decision draft: spec, Discuss and Decision); read what
    the turn needs. SessionGone if the session was deleted since it was resolved."""
    if not target.exists:
        return _open_new(session, operator_id, target, clock=clock)
    row = session.get(ChatSession, target.session_id)
    if row is None or row.operator_id != operator_id:
        raise SessionGone(target.session_id)
    if target.pin:
        _activate(session, operator_id, row.id)
    if target.switch_agent is not None and target.switch_agent != row.agent:
        row.agent = target.switch_agent
        clear_decision(row)
    if target.focus is not UNSET and target.focus != row.focus_issue:
        row.focus_issue = target.focus
        clear_decision(row)
    turns = session.scalars(
        select(ChatTurn)
        .where(ChatTurn.session_id == row.id)
        .order_by(ChatTurn.seq.desc())
        .limit(PROMPT_HISTORY_TURNS)
    ).all()
    return TurnSession(
        id=row.id,
        agent=row.agent,
        title=row.title,
        focus=row.focus_issue,
        kind=row.kind,
        decision_body=row.decision_body,
        decision_issue=row.decision_issue,
        history=[turn_json(turn) for turn in reversed(turns)],
        created=not target.exists,
        pending=proposal_of(row),
    )


def _open_new(
    session: Session, operator_id: int, target: TurnTarget, *, clock: Clock
) -> TurnSession:
    """A new session: two plain statements and no read (it has no history yet), since
    every turn's first message writes one and 1,000 operators may start within a second."""
    focus = None if target.focus is UNSET else target.focus
    row = _new_row(
        operator_id, agent=target.agent, focus=focus, clock=clock, session_id=target.session_id
    )
    session.connection().execute(_INSERT_SESSION, _values(row))
    _activate(session, operator_id, row.id)
    return TurnSession(
        id=row.id,
        agent=row.agent,
        title=None,
        focus=focus,
        kind=row.kind,
        decision_body=None,
        decision_issue=None,
        created=True,
    )


def _activate(session: Session, operator_id: int, session_id: str) -> None:
    """Make the session the operator's active one; SessionGone if the operator is gone."""
    done = session.connection().execute(
        _ACTIVATE, {"p_operator": operator_id, "p_session": session_id}
    )
    if done.rowcount == 0:
        raise SessionGone(session_id)
    loaded = session.identity_map.get(identity_key(Operator, operator_id))
    if loaded is not None:  # a copy this session loaded earlier is stale now
        session.expire(loaded, ["active_session_id"])


# Core statements for the writes every chat turn makes, built once: on the session's
# connection they skip the ORM's per-statement work (the bulk-insert and ORM-enabled
# update paths, a cache key per call), which was most of a group commit's time.
_INSERT_SESSION = insert(ChatSession)
_INSERT_TURNS = insert(ChatTurn)
_ACTIVATE = (
    update(Operator)
    .where(Operator.id == bindparam("p_operator"))
    .values(active_session_id=bindparam("p_session"))
)
_LAST_SEQ = select(func.max(ChatTurn.seq)).where(ChatTurn.session_id == bindparam("p_session"))


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
class TurnRecord:
    """A finished turn, ready to be written: both messages and the session updates."""

    turn_id: str
    user_message: str
    reply: str
    reasoning: str
    intent: str
    meta: dict[str, Any]
    title: str | None = None
    decision: tuple[str, int] | Any | None = UNSET
    pending: Proposal | Any | None = UNSET  # a new proposal, None to clear, UNSET to keep


def persist_turn(
    session: Session,
    operator_id: int,
    session_id: str,
    record: TurnRecord,
    *,
    clock: Clock = utcnow,
) -> list[Message]:
    """Write the user and assistant turns together; returns the two stored messages.

    Three plain statements (update the session, read its last seq, insert both messages)
    rather than an ORM load and flush: every turn of 1,000 concurrent streams ends here, in
    a group commit (bot.group_commit), where the ORM's load and unit of work showed in the
    profile. The update comes first so it holds the session's row lock (PostgreSQL) while
    the seq is read.

    Fails closed: if the session was deleted meanwhile, SessionGone and nothing is written
    (the foreign key refuses orphans even if the delete lands between our check and insert).
    """
    now = clock()
    statement, params = _turn_changes(record, now)
    connection = session.connection()
    done = connection.execute(
        statement, {**params, "p_session": session_id, "p_operator": operator_id}
    )
    if done.rowcount == 0:
        raise SessionGone(session_id)
    _forget_loaded(session, session_id)
    seq = connection.execute(_LAST_SEQ, {"p_session": session_id}).scalar() or 0
    user = ChatTurn(
        id=f"{record.turn_id}-u",
        session_id=session_id,
        seq=seq + 1,
        role=Role.USER,
        content=record.user_message,
        reasoning=None,
        intent=None,
        meta={},
        created_at=now,
    )
    assistant = ChatTurn(
        id=f"{record.turn_id}-a",
        session_id=session_id,
        seq=seq + 2,
        role=Role.ASSISTANT,
        content=record.reply,
        reasoning=record.reasoning[:REASONING_CAP] or None,
        intent=record.intent,
        meta=record.meta,
        created_at=now,
    )
    try:
        connection.execute(_INSERT_TURNS, [_values(user), _values(assistant)])
    except IntegrityError as exc:
        raise SessionGone(session_id) from exc
    return [turn_json(user), turn_json(assistant)]


def _turn_changes(record: TurnRecord, now: datetime) -> tuple[Update, dict[str, Any]]:
    """What a stored turn changes on its session: title, decision, pending proposal,
    activity, and the summary it made stale. An UPDATE (one of eight, built once) and its
    parameters."""
    params: dict[str, Any] = {"p_now": now}
    if record.title:
        params["p_title"] = record.title
    if record.decision is not UNSET:
        body, issue = record.decision if record.decision is not None else (None, None)
        params.update(p_decision_body=body, p_decision_issue=issue)
    if record.pending is not UNSET:
        proposal = record.pending
        params.update(
            p_pending_title=proposal.title if proposal else None,
            p_pending_body=proposal.body if proposal else None,
            p_pending_kind=proposal.kind if proposal else None,
            p_pending_key=proposal.key if proposal else None,
        )
    statement = _turn_update(
        "p_title" in params, "p_decision_body" in params, "p_pending_title" in params
    )
    return statement, params


@functools.cache
def _turn_update(title: bool, decision: bool, pending: bool) -> Update:
    """The session's UPDATE for a stored turn, its values bound by name (a statement built
    per call would have its cache key computed per call, as costly as the ORM flush)."""
    changes: dict[Any, Any] = {
        ChatSession.last_activity_at: _param(ChatSession.last_activity_at, "p_now"),
        # A new turn makes any summary stale: the session is summarised again when the
        # operator leaves it (or it idles). A closed session continued is live again.
        ChatSession.closed_at: None,
        ChatSession.summary_status: case(
            (ChatSession.summary_status == SummaryStatus.DONE.value, SummaryStatus.NONE.value),
            else_=ChatSession.summary_status,
        ),
    }
    columns = [ChatSession.decision_body, ChatSession.decision_issue] if decision else []
    if pending:
        columns += [
            ChatSession.pending_title,
            ChatSession.pending_body,
            ChatSession.pending_kind,
            ChatSession.pending_key,
        ]
    changes.update({column: _param(column, f"p_{column.key}") for column in columns})
    if title:  # only a session without a title takes the turn's
        changes[ChatSession.title] = func.coalesce(
            ChatSession.title, _param(ChatSession.title, "p_title")
        )
    return (
        update(ChatSession)
        .where(
            ChatSession.id == _param(ChatSession.id, "p_session"),
            ChatSession.operator_id == _param(ChatSession.operator_id, "p_operator"),
        )
        .values(changes)
    )


def _param(column: Any, name: str) -> BindParameter[Any]:
    return bindparam(name, type_=column.type)


def _values(row: Any) -> dict[str, Any]:
    """A transient row's columns, for a plain INSERT (the ORM object never joins the
    session: a group commit's shared session would otherwise hold every row it wrote)."""
    return {column.key: getattr(row, column.key) for column in row.__table__.columns}


def _forget_loaded(session: Session, session_id: str) -> None:
    """A group commit shares one ORM session between writes: a copy of this row loaded by
    an earlier write is stale after a plain UPDATE, so the next read loads it again."""
    loaded = session.identity_map.get(identity_key(ChatSession, session_id))
    if loaded is not None:
        session.expire(loaded)


def new_session(
    session: Session,
    operator_id: int,
    *,
    agent: str,
    title: str | None = None,
    issue: int | None = None,
    clock: Clock = utcnow,
) -> tuple[ChatSession, str | None]:
    """Close the open session (its summary is made in the background) and start a fresh one.

    With an issue this is a Discuss session: titled `Discuss #N` unless a title is given,
    focused on that issue, nothing sent.
    """
    operator = _operator(session, operator_id)
    previous = _active(session, operator)
    previous_id = None
    if previous is not None and previous.closed_at is None:
        previous.closed_at = clock()
        clear_decision(previous)
        if mark_left(session, previous.id):
            previous_id = previous.id
    kind = SessionKind.DISCUSS if issue is not None else SessionKind.CHAT
    if issue is not None and not title:
        title = f"Discuss #{issue}"
    row = _create(session, operator, agent=agent, title=title, focus=issue, kind=kind, clock=clock)
    return row, previous_id


def list_sessions(session: Session, operator_id: int, *, limit: int = 100) -> list[SessionSummary]:
    operator = _operator(session, operator_id)
    counts = (
        select(ChatTurn.session_id, func.count().label("turns"))
        .join(ChatSession, ChatSession.id == ChatTurn.session_id)
        .where(ChatSession.operator_id == operator_id)
        .group_by(ChatTurn.session_id)
        .subquery()
    )
    rows = session.execute(
        select(ChatSession, func.coalesce(counts.c.turns, 0))
        .outerjoin(counts, counts.c.session_id == ChatSession.id)
        .where(ChatSession.operator_id == operator_id)
        .order_by(ChatSession.last_activity_at.desc(), ChatSession.created_at.desc())
        .limit(limit)
    ).all()
    return [
        session_json(row, turns=count, active=row.id == operator.active_session_id)
        for row, count in rows
    ]


def get_session(session: Session, operator_id: int, session_id: str) -> SessionView:
    """The session with its messages and stored summary (`turn_in_flight` is the turn
    registry's to say: None here). Reading changes nothing."""
    row = _owned(session, operator_id, session_id)
    active = _operator(session, operator_id).active_session_id == row.id
    messages = [turn_json(turn) for turn in row.turns]
    return session_view(
        SessionView, row, turns=len(messages), active=active, messages=messages, turn_in_flight=None
    )


def open_session(
    session: Session, operator_id: int, session_id: str
) -> tuple[SessionView, str | None]:
    """Reopen: pin the next message to this session. Returns it and the session the
    operator left by doing so when that one is due a summary."""
    row = _owned(session, operator_id, session_id)
    operator = _operator(session, operator_id)
    left = operator.active_session_id
    operator.active_session_id = row.id
    due = left is not None and left != row.id and mark_left(session, left)
    return get_session(session, operator_id, session_id), (left if due else None)


def history(session: Session, operator_id: int, *, session_id: str | None, limit: int) -> History:
    """The last `limit` messages of the named session, else of the active one."""
    if session_id is None:
        row = _active(session, _operator(session, operator_id))
        if row is None:
            return History(session=None, messages=[])
    else:
        row = _owned(session, operator_id, session_id)
    turns = session.scalars(
        select(ChatTurn)
        .where(ChatTurn.session_id == row.id)
        .order_by(ChatTurn.seq.desc())
        .limit(limit)
    ).all()
    return History(session=row.id, messages=[turn_json(t) for t in reversed(turns)])


def delete_session(session: Session, operator_id: int, session_id: str) -> None:
    row = _owned(session, operator_id, session_id)
    operator = _operator(session, operator_id)
    if operator.active_session_id == row.id:
        operator.active_session_id = None
    session.execute(delete(ChatTurn).where(ChatTurn.session_id == row.id))
    session.delete(row)


def clear_session(session: Session, operator_id: int, *, session_id: str | None) -> Cleared:
    """Remove the messages (and drafts) of the named or active session; the session stays."""
    if session_id is None:
        row = _active(session, _operator(session, operator_id))
        if row is None:
            return Cleared(session=None, cleared=0)
    else:
        row = _owned(session, operator_id, session_id)
    result = session.execute(delete(ChatTurn).where(ChatTurn.session_id == row.id))
    clear_decision(row)
    set_pending(row, None)
    return Cleared(session=row.id, cleared=result.rowcount)  # type: ignore[attr-defined]


def session_json(
    row: ChatSession, *, turns: int | None = None, active: bool = False
) -> SessionSummary:
    return session_view(SessionSummary, row, turns=turns, active=active)


def session_view(
    view: type[View], row: ChatSession, *, turns: int | None, active: bool, **more: Any
) -> View:
    """The session as `view` shows it: a summary, or with its messages (`more`)."""
    decision = None
    if row.decision_body and row.decision_issue is not None:
        decision = SessionDecision(body=row.decision_body, issue=row.decision_issue)
    return view(
        id=row.id,
        title=row.title,
        kind="discuss" if row.kind == SessionKind.DISCUSS else "chat",
        agent=row.agent,
        focus=row.focus_issue,
        created_at=row.created_at.isoformat(),
        last_activity_at=row.last_activity_at.isoformat(),
        closed_at=row.closed_at.isoformat() if row.closed_at else None,
        summary=row.summary,
        summary_status=row.summary_status,
        decision=decision,
        pending=proposal.view() if (proposal := proposal_of(row)) else None,
        turns=turns,
        active=active,
        **more,
    )


def turn_json(turn: ChatTurn) -> Message:
    return Message(
        id=turn.id,
        seq=turn.seq,
        role="user" if turn.role == Role.USER else "assistant",
        content=turn.content,
        reasoning=turn.reasoning,
        intent=turn.intent,
        meta=turn.meta,
        created_at=turn.created_at.isoformat(),
    )


def decision_published(
    session: Session, operator_id: int, *, session_id: str | None, issue: int
) -> str | None:
    """Publish succeeded: clear the draft of the named session, else of the active session
    when its draft is for that issue (spec: the draft clears on Publish success)."""
    if session_id is not None:
        row: ChatSession | None = _owned(session, operator_id, session_id)
    else:
        row = _active(session, _operator(session, operator_id))
        if row is not None and row.decision_issue != issue:
            row = None
    if row is None:
        return None
    clear_decision(row)
    return row.id


def take_pending(
    session: Session, operator_id: int, *, session_id: str | None
) -> tuple[str, Proposal] | None:
    """(session id, proposal) of the named or active session's pending proposal, if any."""
    if session_id is not None:
        row: ChatSession | None = _owned(session, operator_id, session_id)
    else:
        row = _active(session, _operator(session, operator_id))
    if row is None:
        return None
    proposal = proposal_of(row)
    return (row.id, proposal) if proposal is not None else None


def clear_pending(session: Session, operator_id: int, session_id: str, key: str) -> None:
    """Clear the proposal that was filed (a newer one held meanwhile stays)."""
    row = _owned(session, operator_id, session_id)
    proposal = proposal_of(row)
    if proposal is not None and proposal.key == key:
        set_pending(row, None)


def agent_of(session: Session, operator_id: int, session_id: str | None) -> str | None:
    if session_id is None:
        row = _active(session, _operator(session, operator_id))
        return row.agent if row is not None else None
    return _owned(session, operator_id, session_id).agent
