"""Chat sessions and their turns written: a turn's session opened (`open_for_turn`), its two
messages persisted (`persist_turn`), a session started, reopened, cleared or deleted. The
storage side of Chat, free of HTTP."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    Update,
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

from bot.chat.forget_words import Words
from bot.chat.message_ids import answered_id, asked_id
from bot.chat.open_turn_rows import FORGET_OPEN, INSERT_OPEN, OpenTurn
from bot.chat.pending_forgets import current_epoch, owed, settle
from bot.chat.placement import TurnTarget
from bot.chat.proposals import Proposal, proposal_of, set_pending
from bot.chat.session_rows import (
    PROMPT_HISTORY_TURNS,
    REASONING_CAP,
    UNSET,
    SessionGone,
    active_session,
    clear_decision,
    create_session,
    locked_operator_row,
    new_session_row,
    operator_row,
    owned_session,
)
from bot.chat.session_views import get_session, turn_json
from bot.chat.summary import mark_left
from bot.chat.turn_keys import drop_session_keys
from bot.chat.turn_record import TurnRecord
from bot.chat.unseen import mark_seen
from bot.clock import Clock, utcnow
from bot.contracts.chat import (
    Cleared,
    Message,
)
from bot.contracts.chat import Session as SessionView
from bot.models import ChatSession, ChatTurn, Operator, Role, SessionKind, SummaryStatus


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


@dataclass(frozen=True)
class Acknowledged:
    """The turn whose session `open_for_turn` writes: its first frame told the operator it
    has the message, so the message is kept (an `OpenTurn` row) until the turn stores it or
    ends without it; a process killed meanwhile leaves the row for the next start."""

    turn_id: str
    message: str
    key: str | None = None  # its idempotency key's row key (bot.chat.turn_keys.row_key)


def open_for_turn(
    session: Session,
    operator_id: int,
    target: TurnTarget,
    *,
    turn: Acknowledged | None = None,
    clock: Clock = utcnow,
) -> TurnSession:
    """Write what `resolve_turn` decided: create or pin the session, apply an agent switch or
    focus change (either clears the Decision draft: spec, Discuss and Decision); keep the
    acknowledged `turn`; read what the turn needs. SessionGone if the session was deleted
    since it was resolved."""
    # Read (and held) before the history: a forget raised after it is owed at the store,
    # one raised before it has scrubbed the history (bot.chat.pending_forgets).
    epoch = current_epoch(session) if turn is not None else 0
    opened = _open_session(session, operator_id, target, clock=clock)
    if turn is not None:
        row = OpenTurn(
            turn_id=turn.turn_id,
            operator_id=operator_id,
            session_id=opened.id,
            message=turn.message,
            started_at=clock(),
            key=turn.key,
            forget_epoch=epoch,
        )
        session.connection().execute(INSERT_OPEN, _values(row))
    return opened


def _open_session(
    session: Session, operator_id: int, target: TurnTarget, *, clock: Clock
) -> TurnSession:
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
    row = new_session_row(
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


@dataclass(frozen=True)
class StoredTurn:
    """A turn's two messages as stored, and the words of the forgets raised while it ran,
    which they leave out (bot.chat.pending_forgets; [] for none)."""

    messages: list[Message]
    forgotten: list[str] = field(default_factory=list)


def persist_turn(
    session: Session,
    operator_id: int,
    session_id: str,
    record: TurnRecord,
    *,
    clock: Clock = utcnow,
) -> StoredTurn:
    """Write the user and assistant turns together; returns the two stored messages,
    without the words of any forget raised since the turn opened.

    The forget epoch and the turn's kept-open row read first (the forgets it owes:
    bot.chat.pending_forgets), then three plain statements (update the session, read its
    last seq, insert both messages) rather than an ORM load and flush: every turn of 1,000
    concurrent streams ends here, in a group commit (bot.group_commit), where the ORM's load
    and unit of work showed in the profile. The update comes first so it holds the
    session's row lock (PostgreSQL) while the seq is read.

    Fails closed: if the session was deleted meanwhile, SessionGone and nothing is written
    (the foreign key refuses orphans even if the delete lands between our check and insert).
    """
    now = clock()
    forgotten = owed(session, record.turn_id, session_id)
    for words in forgotten:
        record = record.without(Words(words))
    statement, params = _turn_changes(record, now)
    connection = session.connection()
    done = connection.execute(
        statement, {**params, "p_session": session_id, "p_operator": operator_id}
    )
    if done.rowcount == 0:
        raise SessionGone(session_id)
    _forget_loaded(session, session_id)
    seq = connection.execute(_LAST_SEQ, {"p_session": session_id}).scalar() or 0
    user, assistant = _messages(record, session_id, seq, now)
    try:
        connection.execute(_INSERT_TURNS, [_values(user), _values(assistant)])
    except IntegrityError as exc:
        raise SessionGone(session_id) from exc
    connection.execute(FORGET_OPEN, {"p_turn": record.turn_id})  # stored: nothing left open
    if forgotten:  # this turn owed them: perhaps the last that did
        settle(session)
    return StoredTurn([turn_json(user), turn_json(assistant)], forgotten)


def _messages(
    record: TurnRecord, session_id: str, seq: int, now: datetime
) -> tuple[ChatTurn, ChatTurn]:
    """The turn's two messages, after the session's message `seq`."""
    user = ChatTurn(
        id=asked_id(record.turn_id),
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
        id=answered_id(record.turn_id),
        session_id=session_id,
        seq=seq + 2,
        role=Role.ASSISTANT,
        content=record.reply,
        reasoning=record.reasoning[:REASONING_CAP] or None,
        intent=record.intent,
        meta=record.meta,
        created_at=now,
    )
    return user, assistant


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
    if decision:  # a publish under way then leaves this draft alone (proposals.py)
        changes[ChatSession.decision_version] = ChatSession.decision_version + 1
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
    operator = locked_operator_row(session, operator_id)
    previous = active_session(session, operator)
    previous_id = None
    if previous is not None and previous.closed_at is None:
        previous.closed_at = clock()
        clear_decision(previous)
        if mark_left(session, previous.id):
            previous_id = previous.id
    kind = SessionKind.DISCUSS if issue is not None else SessionKind.CHAT
    if issue is not None and not title:
        title = f"Discuss #{issue}"
    row = create_session(
        session, operator, agent=agent, title=title, focus=issue, kind=kind, clock=clock
    )
    return row, previous_id


def open_session(
    session: Session, operator_id: int, session_id: str
) -> tuple[SessionView, str | None]:
    """Reopen: pin the next message to this session. Returns it and the session the
    operator left by doing so when that one is due a summary.

    The operator's row is taken first and the session read after it: read before, a reopen
    waiting behind a delete made the deleted session active again."""
    operator = locked_operator_row(session, operator_id)
    row = owned_session(session, operator_id, session_id, current=True)
    left = operator.active_session_id
    operator.active_session_id = row.id
    mark_seen(session, operator_id, row.id)  # opening it shows its results: no dot
    due = left is not None and left != row.id and mark_left(session, left)
    return get_session(session, operator_id, session_id), (left if due else None)


def delete_session(session: Session, operator_id: int, session_id: str) -> None:
    """Delete the session, its messages and what its keyed turns recorded for their keys.
    The operator's row is taken first and the session read after it, so deletes sent
    together run one after the other and the later ones find nothing (NotFound), as a
    reopen waiting behind one does."""
    operator = locked_operator_row(session, operator_id)
    row = owned_session(session, operator_id, session_id, current=True)
    if operator.active_session_id == row.id:
        operator.active_session_id = None
    session.execute(delete(ChatTurn).where(ChatTurn.session_id == row.id))
    drop_session_keys(session, row.id)
    session.delete(row)


def clear_session(session: Session, operator_id: int, *, session_id: str | None) -> Cleared:
    """Remove the messages (and drafts) of the named or active session, and what its keyed
    turns recorded for their keys; the session stays."""
    if session_id is None:
        row = active_session(session, operator_row(session, operator_id))
        if row is None:
            return Cleared(session=None, cleared=0)
    else:
        row = owned_session(session, operator_id, session_id)
    result = session.execute(delete(ChatTurn).where(ChatTurn.session_id == row.id))
    drop_session_keys(session, row.id)
    clear_decision(row)
    set_pending(row, None)
    return Cleared(session=row.id, cleared=result.rowcount)  # type: ignore[attr-defined]
