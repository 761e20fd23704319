"""Reopening and deleting one chat together (two windows, a retried request, a double
click on Delete) serialise on the operator's row like new chats do
(tests/test_chat_sessions_together.py): a chat deleted is never left the operator's
active chat, a reopen either finds it (before the delete) or answers NotFound (after), and
of deletes sent together one deletes it and the others answer NotFound, never an error of
the database. Before, each read the chat before it took the operator's row, so a reopen
that waited behind a delete made the deleted chat active again. Both backends."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from bot.chat.session_store import delete_session, new_session, open_session
from bot.db import Database
from bot.errors import NotFound
from bot.models import ChatSession, ChatTurn, Operator
from tests.fakes.together import together
from tests.test_chat_sessions_together import a_chat_with_a_turn, an_operator

TOGETHER = 8
ROUNDS = 4


def outcome(db: Database, change: Any, operator_id: int, chat: str) -> str:
    try:
        db.call(change, operator_id, chat)
    except NotFound:
        return "not found"
    return "done"


def turns_of(db: Database, chat: str) -> int:
    return db.call(lambda s: s.scalar(select(func.count()).where(ChatTurn.session_id == chat)))


def deletes_and_reopens(db: Database, operator_id: int, chat: str) -> list[str]:
    """Half delete the chat, half reopen it, released together."""
    changes = [delete_session, open_session]
    results, failed = together(TOGETHER, lambda n: outcome(db, changes[n % 2], operator_id, chat))
    assert failed == [], failed[:3]
    return results


def deletes(db: Database, operator_id: int, chat: str) -> list[str]:
    results, failed = together(TOGETHER, lambda n: outcome(db, delete_session, operator_id, chat))
    assert failed == [], failed[:3]
    return results


def active_of(db: Database, operator_id: int) -> str | None:
    return db.call(lambda s: s.get(Operator, operator_id).active_session_id)


def exists(db: Database, session_id: str) -> bool:
    return db.call(lambda s: s.get(ChatSession, session_id)) is not None


def test_deletes_sent_together_delete_once_and_the_rest_find_nothing(any_db: Database) -> None:
    operator = an_operator(any_db, "deletes")
    for _ in range(ROUNDS):
        chat = a_chat_with_a_turn(any_db, operator.id)

        results = deletes(any_db, operator.id, chat)

        assert sorted(results) == ["done"] + ["not found"] * (TOGETHER - 1)
        assert not exists(any_db, chat)
        assert turns_of(any_db, chat) == 0
        assert active_of(any_db, operator.id) is None


def test_a_chat_reopened_while_deleted_is_never_left_active(any_db: Database) -> None:
    operator = an_operator(any_db, "reopen-delete")
    for _ in range(ROUNDS):
        chat = a_chat_with_a_turn(any_db, operator.id)
        any_db.call(new_session, operator.id, agent="default")  # another chat is active

        results = deletes_and_reopens(any_db, operator.id, chat)

        assert "done" in results
        assert not exists(any_db, chat)
        # Whatever order they ran in, the deleted chat is not the active one.
        assert active_of(any_db, operator.id) != chat


def test_reopens_sent_together_each_open_the_chat(any_db: Database) -> None:
    operator = an_operator(any_db, "reopens")
    chat = a_chat_with_a_turn(any_db, operator.id)
    any_db.call(new_session, operator.id, agent="default")

    results, failed = together(
        TOGETHER, lambda n: any_db.call(open_session, operator.id, chat)[0].id
    )

    assert failed == [], failed[:3]
    assert results == [chat] * TOGETHER
    assert active_of(any_db, operator.id) == chat
