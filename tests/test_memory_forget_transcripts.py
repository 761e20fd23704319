"""Chat's "forget ..." reaches Chat's own records, not only session memory: the words of a
`forget that <words>` leave every chat session of the repository (messages, reasoning,
stored metadata, titles, summaries, drafts), the forget turn's own stored messages too, and
a session summarised after the forget does not put them back into memory; a forgotten
`chat_summary` chunk takes its session's stored summary with it. The real app on
PostgreSQL, in-process (bot/chat/forgotten.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.chat import operator_commands
from bot.chat.turn_keys import KIND as TURN_KEY_KIND
from bot.contracts.events import SessionFrame
from bot.idempotency import SideEffect
from bot.models import ChatSession, ChatTurn
from tests.conftest import ApiClient, make_settings

SECRET = "the deploy password is hunter2"


@pytest.fixture
async def api(api_factory: Callable[..., Any], pg_url: str, tmp_path: Path) -> ApiClient:
    client: ApiClient = await api_factory(make_settings(tmp_path, database_url=pg_url))
    return client


async def _say(api: ApiClient, message: str, **more: Any) -> dict[str, Any]:
    turn = await api.post("/api/operator/chat", json={"message": message, **more})
    assert turn.status == 200, await turn.text()
    return dict(await turn.json())


async def _leave_for_a_new_chat(api: ApiClient) -> None:
    """Start a new chat: the one left is summarised (in the background; waited for)."""
    assert (await api.post("/api/operator/chat/new", json={})).status == 201
    await api.services.background.drain()


async def _stored(api: ApiClient, session: str) -> dict[str, Any]:
    answer = await api.get(f"/api/operator/chat/session/{session}")
    assert answer.status == 200, await answer.text()
    return dict(await answer.json())


def _sessions_text(api: ApiClient) -> str:
    """Everything the database keeps of every chat session's messages, as one text."""
    turns = api.services.db.call(
        lambda s: [(t.content, t.reasoning, t.meta) for t in s.query(ChatTurn)]
    )
    return json.dumps(turns)


async def test_forget_that_takes_the_words_out_of_every_chat_of_the_repository(
    api: ApiClient,
) -> None:
    memory, repo = api.services.memory, api.services.settings.repo
    # A chat that said the words, summarised into memory; its title was made from them.
    said = await _say(api, f"Remember for later: {SECRET}.")
    await _leave_for_a_new_chat(api)
    assert "hunter2" in (await _stored(api, said["session"]))["summary"]
    # Another operator's chat on the same repository says them too, not summarised yet.
    other = api.new_operator("other")
    theirs = await _say(other, f"Is it true that {SECRET.upper()}?")

    forget = await _say(api, f"forget that {SECRET}")

    reply = forget["reply"]
    assert "Forgotten from session memory" in reply and "chat_summary" in reply, reply
    assert "Taken out of the chat history too: 4 message(s), 2 session(s)." in reply, reply
    assert "hunter2" not in _sessions_text(api)  # the forget turn's own messages included
    first = await _stored(api, said["session"])
    assert first["title"] == "Remember for later: [forgotten]."
    assert "hunter2" not in json.dumps(first) and first["summary_status"] == "none"
    assert first["messages"][0]["content"] == "Remember for later: [forgotten]."
    own = await _stored(api, forget["session"])
    assert own["messages"][0]["content"] == "forget that [forgotten]"
    assert own["title"] == "forget that [forgotten]"
    assert "hunter2" not in json.dumps(await _stored(other, theirs["session"]))

    # Summarised after the forget (the idle sweep, a leave), nothing brings the words back.
    await api.services.chat_sessions.summaries.summarise(said["session"])
    await _leave_for_a_new_chat(other)
    await _leave_for_a_new_chat(api)
    memory.sync()
    assert [h.record.text for h in memory.search("deploy password hunter2", repo=repo)] == []
    assert "hunter2" not in json.dumps(await _stored(api, said["session"]))


async def test_a_forgotten_chat_summary_takes_the_sessions_stored_summary(
    api: ApiClient,
) -> None:
    said = await _say(api, "Which runner builds the zeppelin nightly?")
    await _leave_for_a_new_chat(api)
    assert "zeppelin" in (await _stored(api, said["session"]))["summary"]
    operator = api.services.db.call(lambda s: s.scalar(select(ChatSession.operator_id)))
    seen = await api.services.events.log.last_id(operator)

    forget = await _say(api, f"forget chat_summary:{said['session']}")

    reply = forget["reply"]
    assert "Forgotten with them: the stored summary of 1 chat session(s)." in reply, reply
    assert (await _stored(api, said["session"]))["summary"] is None
    # The session left earlier changed: its operator's clients are told to read it again.
    told = await api.services.events.log.read(operator, seen, wait=0.1)
    frames = [event.frame for event in told.events if isinstance(event.frame, SessionFrame)]
    changes = [(frame.session_id, frame.change) for frame in frames]
    assert (said["session"], "forgotten") in changes, changes


async def test_a_forget_too_many_messages_say_forgets_nothing(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operator_commands, "FORGET_MESSAGES_AT_MOST", 2)
    await _say(api, f"Note: {SECRET}.")
    await _say(api, f"Again: {SECRET}.")

    forget = await _say(api, f"forget that {SECRET}")

    assert "more than 2 chat messages say that; nothing was forgotten" in forget["reply"]
    assert _sessions_text(api).count("hunter2") >= 3  # the forget as typed, with the rest


def _kept_for_keys(api: ApiClient) -> str:
    """Everything the records of keyed chat turns keep (what was asked, the turn's first
    and last frames), as one text."""
    rows = api.services.db.call(
        lambda s: [
            (row.request, row.result)
            for row in s.scalars(select(SideEffect).where(SideEffect.kind == TURN_KEY_KIND))
        ]
    )
    assert rows, "no keyed turn was recorded"
    return json.dumps(rows)


async def test_forget_that_takes_the_words_out_of_what_keyed_turns_recorded(
    api: ApiClient,
) -> None:
    """A chat turn sent with an idempotency key keeps what was asked and its answer for the
    key; the forget takes the words out of those records too, its own included, and a send
    again with either key answers the recorded turn without them."""
    said = await _say(api, f"Remember for later: {SECRET}.", request_id="k-said")
    assert "hunter2" in _kept_for_keys(api)

    forget = await _say(api, f"forget that {SECRET}", request_id="k-forget")

    assert "Taken out of the chat history too" in forget["reply"], forget["reply"]
    assert "hunter2" not in _kept_for_keys(api)
    for message, key, first in (
        (f"Remember for later: {SECRET}.", "k-said", said),
        (f"forget that {SECRET}", "k-forget", forget),
    ):
        again = await _say(api, message, request_id=key)  # the same message, the same key
        assert again["turn_id"] == first["turn_id"] and "hunter2" not in json.dumps(again)
    # Another message under a used key is still refused.
    other = await api.post(
        "/api/operator/chat", json={"message": "Something else.", "request_id": "k-said"}
    )
    assert other.status == 422, await other.text()
