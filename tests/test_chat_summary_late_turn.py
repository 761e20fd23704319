"""A turn stored while its session's summary is being made (the operator left while a reply
was still streaming) is not lost to the summary: the one being made is kept, and the
session stays due another, which covers that turn. Before, the summary was stored as done
without the last exchange, and leaving the session again changed nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.agents import sync_agents
from bot.background import BackgroundTasks
from bot.chat import summary as summary_store
from bot.chat.session_store import new_session, persist_turn
from bot.chat.summariser import Summariser
from bot.chat.turn_record import TurnRecord
from bot.config import AgentConfig
from bot.db import Database
from bot.models import ChatSession, SummaryStatus
from bot.operators import create_operator
from bot.runtimes.base import Runtime
from tests.fakes.runtimes import ScriptedRuntime, reply

AGENT = AgentConfig("default", "octo/widgets", Path("."), "openai")


def _turn(turn_id: str, message: str, answer: str) -> TurnRecord:
    return TurnRecord(turn_id, message, answer, "", "chat", {})


def _status(db: Database, chat: str) -> SummaryStatus:
    row = db.call(lambda s: s.get(ChatSession, chat))
    assert row is not None
    return SummaryStatus(row.summary_status)


async def test_a_turn_stored_while_the_summary_is_made_is_summarised_after(
    any_db: Database,
) -> None:
    db = any_db  # on each backend
    db.call(sync_agents, {AGENT.name: AGENT})
    operator, _ = db.call(create_operator, "ada")
    chat, _ = db.call(new_session, operator.id, agent=AGENT.name)
    db.call(persist_turn, operator.id, chat.id, _turn("t1", "Why is CI red?", "Out of disk."))
    gate = asyncio.Event()
    model = ScriptedRuntime(
        [reply("Summary: CI was red, the runner was out of disk."), reply("Summary: both.")],
        gate=gate,
    )

    def runtimes(_agent: AgentConfig) -> Runtime:
        return model

    summariser = Summariser(
        db=db, agents={AGENT.name: AGENT}, runtimes=runtimes, background=BackgroundTasks()
    )

    assert db.call(summary_store.mark_left, chat.id)  # the operator left: a summary is due
    making = asyncio.create_task(summariser.summarise(chat.id))
    await asyncio.wait_for(model.called.wait(), 30)  # the model is writing it
    # The reply that was still streaming when the operator left is stored now.
    last = _turn("t2", "And the nightly?", "The nightly needs a bigger runner.")
    db.call(persist_turn, operator.id, chat.id, last)
    gate.set()
    first = await asyncio.wait_for(making, 30)

    assert first is not None and "out of disk" in first.text  # kept: it is true of t1
    assert _status(db, chat.id) == SummaryStatus.NONE  # still due: t2 is not in it
    assert db.call(summary_store.mark_left, chat.id)  # leaving again makes the next one
    second = await asyncio.wait_for(summariser.summarise(chat.id), 30)
    assert second is not None and second.text == "Summary: both."
    assert "bigger runner" in model.requests[1].messages[0].content  # it read the late turn
    assert _status(db, chat.id) == SummaryStatus.DONE
    assert not db.call(summary_store.mark_left, chat.id)  # and nothing more is due
