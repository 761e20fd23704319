"""Where a starting turn goes: the session it names or the operator's active one, created
if there is none, with an agent switch or a focus change (`place_turn`); read for many turns
at once (`placements`, through bot.group_read)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Select,
    and_,
    bindparam,
    select,
)
from sqlalchemy.orm import Session

from bot.chat.session_rows import UNSET, new_id
from bot.errors import NotFound
from bot.models import ChatSession, Operator


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
