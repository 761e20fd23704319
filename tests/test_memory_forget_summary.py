"""What Chat's "forget that <words>" forgot does not come back through a chat summary: the
forget command and its reply are left out of the session's summary (they quote the words),
and a summary stored before the forget that says them is forgotten with the rest. The real
app, in-process: sessions are summarised as leaving them for a new chat does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.agents import sync_agents
from bot.background import BackgroundTasks
from bot.chat import summary as summary_store
from bot.chat.session_store import new_session
from bot.chat.summariser import Summariser
from bot.config import AgentConfig
from bot.db import Database, upgrade
from bot.dialogue.titles import title_from_message
from bot.models import ChatTurn
from bot.operators import create_operator
from bot.runtimes.base import Runtime
from memory import ChunkIn
from tests.conftest import ApiClient

SECRET = "the deploy password is hunter2"


def no_model(agent: AgentConfig) -> Runtime:
    raise AssertionError("no agent is configured: the summary is extractive")


async def _say(api: ApiClient, message: str) -> dict[str, object]:
    turn = await api.post("/api/operator/chat", json={"message": message})
    assert turn.status == 200, await turn.text()
    return dict(await turn.json())


async def _leave_for_a_new_chat(api: ApiClient) -> None:
    """Start a new chat: the one left is summarised (in the background; waited for)."""
    assert (await api.post("/api/operator/chat/new", json={})).status == 201
    await api.services.background.drain()


async def test_forgotten_words_do_not_come_back_through_chat_summaries(api: ApiClient) -> None:
    memory = api.services.memory
    assert memory is not None
    repo = api.services.settings.repo
    memory.add([ChunkIn(f"Staging notes: {SECRET}, rotate it monthly.", "comment", repo, issue=9)])
    # An earlier chat quotes the words; its summary, stored in memory, says them too.
    earlier = await _say(api, f"Is it true that {SECRET}?")
    await _leave_for_a_new_chat(api)
    memory.sync()
    sources = {hit.record.source for hit in memory.search("deploy password hunter2", repo=repo)}
    assert sources == {"comment", "chat_summary"}, sources

    # The operator forgets the words (the earlier chat's summary with them), then chats on.
    forget = await _say(api, f"forget that {SECRET}")
    reply = str(forget["reply"])
    assert "Forgotten from session memory" in reply and "chat_summary" in reply, reply
    assert forget["session"] != earlier["session"]
    await _say(api, "Which runner builds the zeppelin nightly?")
    await _leave_for_a_new_chat(api)  # the forget's own session is summarised now
    stored = await (await api.get(f"/api/operator/chat/session/{forget['session']}")).json()
    assert stored["summary_status"] == "done" and "zeppelin" in stored["summary"]
    assert "hunter2" not in stored["summary"], stored["summary"]

    memory.sync()
    assert memory.search("deploy password hunter2", repo=repo) == []
    assert memory.search(SECRET, repo=repo) == []
    [kept] = memory.search("zeppelin nightly runner", repo=repo)  # the summary is in memory
    assert kept.record.source == "chat_summary" and "hunter2" not in kept.record.text


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database.from_url(f"sqlite:///{tmp_path / 'steelframe.db'}")
    upgrade(database.engine)
    yield database
    database.dispose()


def a_chat(db: Database, said: list[tuple[str, str, str]], *, title: str | None = None) -> str:
    """A session of the default agent with these (turn, role, text) messages, in order."""
    agent = AgentConfig("default", "octo/widgets", Path("."), "offline")
    db.call(sync_agents, {agent.name: agent})
    operator, _ = db.call(create_operator, f"op-{len(said)}")
    chat, _ = db.call(new_session, operator.id, agent="default", title=title)
    now = datetime.now(UTC)
    db.call(
        lambda s: s.add_all(
            ChatTurn(
                id=f"{turn}-{role[0]}",
                session_id=chat.id,
                seq=seq,
                role=role,
                content=content,
                meta={},
                created_at=now,
            )
            for seq, (turn, role, content) in enumerate(said, start=1)
        )
    )
    return chat.id


async def test_a_summary_leaves_out_forget_commands_their_replies_and_title(
    db: Database,
) -> None:
    forget = f"Please forget that {SECRET}."
    said = [
        ("t1", "user", forget),
        ("t1", "assistant", f'Forgotten from session memory (saying "{SECRET}").'),
        ("t2", "user", "Why is the nightly build red?"),
        ("t2", "assistant", "The runner is out of disk."),
        ("t3", "user", "Should we forget that hunter2 thing?"),  # a question, not a command
    ]
    chat = a_chat(db, said, title=title_from_message(forget))  # the title the first gave
    summariser = Summariser(db=db, agents={}, runtimes=no_model, background=BackgroundTasks())

    summary = await summariser.summarise(chat)

    assert summary is not None
    assert "password" not in summary.text and "Forgotten" not in summary.text, summary.text
    assert summary.text.startswith("Why is the nightly build red?: 2 message(s)"), summary.text
    assert "out of disk" in summary.text and "hunter2 thing" in summary.text


async def test_a_forget_reply_at_the_edge_of_the_summarised_turns_is_left_out(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary_store, "SOURCE_TURNS", 4)  # the newest 4 turns are summarised
    said = [
        ("t1", "user", f"forget that {SECRET}"),
        ("t1", "assistant", f'Forgotten (saying "{SECRET}").'),  # 4th newest: its message is not
        ("note", "assistant", "Task #3 finished: the runner was cleaned."),
        ("t2", "user", "Why is the nightly build red?"),
        ("t2", "assistant", "The runner is out of disk."),
    ]
    summariser = Summariser(db=db, agents={}, runtimes=no_model, background=BackgroundTasks())

    summary = await summariser.summarise(a_chat(db, said))

    assert summary is not None and "hunter2" not in summary.text, summary.text
    assert "out of disk" in summary.text


async def test_a_session_of_only_a_forget_is_summarised_empty(db: Database) -> None:
    said = [
        ("t1", "user", f"forget that {SECRET}"),
        ("t1", "assistant", f'Forgotten (saying "{SECRET}").'),
    ]
    chat = a_chat(db, said)
    kept: list[str] = []
    summariser = Summariser(
        db=db,
        agents={},
        runtimes=no_model,
        background=BackgroundTasks(),
        sinks=(lambda _session, summary: kept.append(summary.text),),
    )

    summary = await summariser.summarise(chat)

    assert summary is not None and summary.text == "" and kept == []  # memory gets nothing
    assert await summariser.summarise(chat) is None  # done: not summarised again
