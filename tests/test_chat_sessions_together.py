"""New chats started together by one operator (a double click, two windows, a retried
request) leave one chat open, the active one: each closes the chat that was active when it
ran, so every other chat is closed, and the chat with turns in it is handed to its summary
once. Before, each read the same active chat and several new chats stayed open, never to be
summarised when left. Both backends."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.agents import sync_agents
from bot.chat.session_store import new_session
from bot.config import AgentConfig
from bot.db import Database
from bot.models import ChatSession, ChatTurn, Operator
from bot.operators import create_operator
from tests.fakes.together import together as run_together

TOGETHER = 8


def together(work: Any) -> list[Any]:
    results, failed = run_together(TOGETHER, work)
    assert failed == [], failed[:3]
    return results


def the_chats(db: Database, operator_id: int) -> tuple[list[ChatSession], str | None]:
    rows = db.call(
        lambda s: list(s.scalars(select(ChatSession).where(ChatSession.operator_id == operator_id)))
    )
    active = db.call(lambda s: s.get(Operator, operator_id).active_session_id)
    return rows, active


def an_operator(db: Database, name: str) -> Operator:
    agent = AgentConfig("default", "octo/widgets", Path("."), "offline")
    db.call(sync_agents, {agent.name: agent})
    operator, _ = db.call(create_operator, name)
    return operator


def a_chat_with_a_turn(db: Database, operator_id: int) -> str:
    chat, _ = db.call(new_session, operator_id, agent="default")
    turn = ChatTurn(
        id=f"{chat.id}-u",
        session_id=chat.id,
        seq=1,
        role="user",
        content="hi",
        meta={},
        created_at=datetime.now(UTC),
    )
    db.call(lambda s: s.add(turn))
    return chat.id


def test_new_chats_started_together_leave_only_the_active_one_open(any_db: Database) -> None:
    operator = an_operator(any_db, "together")
    first = a_chat_with_a_turn(any_db, operator.id)

    results = together(lambda n: any_db.call(new_session, operator.id, agent="default"))

    rows, active = the_chats(any_db, operator.id)
    assert len(rows) == TOGETHER + 1
    assert [row.id for row in rows if row.closed_at is None] == [active]
    # The chat with turns in it was closed by one of them, and handed to its summary once
    # (the new ones closed meanwhile had nothing to summarise).
    assert [previous for _, previous in results if previous is not None] == [first]
