"""Only a turn whose process died is noted at the next start (tests/test_dev_killed_mid_turn.py
kills one for real): a turn answered or stopped leaves nothing open, so a restart adds no note
to its session; a turn still running is left alone; one left open by a dead process is noted
once, and its session keeps what it had."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.chat.open_turn_rows import OpenTurn
from bot.chat.turn import CUT_KIND, OWNER_GONE_REPLY
from bot.clock import utcnow
from bot.runtimes.base import Delta
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.runtimes import ScriptedRuntime


def open_turns(api: ApiClient) -> list[str]:
    return api.services.db.call(lambda s: list(s.scalars(select(OpenTurn.turn_id))))


async def messages(api: ApiClient, session: str) -> list[tuple[str, str]]:
    found = (await (await api.get(f"/api/operator/chat/session/{session}")).json())["messages"]
    return [(m["role"], m["content"]) for m in found]


async def test_answered_stopped_and_failed_turns_leave_nothing_to_note(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("Answered.")], [Delta("never")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gate.set()
    done = await (await api.post("/api/operator/chat", json={"message": "one"})).json()
    gate.clear()
    stream = await api.post(
        "/api/operator/chat/stream", json={"message": "two", "session": done["session"]}
    )
    await read_sse(stream, until="status")  # its session may be still being written
    assert (await (await api.post("/api/operator/chat/stop")).json())["stopped"] is True
    assert (await read_sse(stream))[-1]["reason"] == "stopped"

    assert open_turns(api) == []
    assert await api.services.chat_turns.note_left_turns() == 0
    assert await messages(api, done["session"]) == [("user", "one"), ("assistant", "Answered.")]


async def test_a_turn_left_open_is_noted_once_and_a_running_one_is_left(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("Answered.")]], gate=gate)
    api = await api_factory(
        make_settings(tmp_path, redis_url=redis_url), runtimes=lambda agent: runtime
    )
    turns = api.services.chat_turns
    stream = await api.post("/api/operator/chat/stream", json={"message": "held"})
    [started] = await read_sse(stream, until="status")
    session = started["session"]
    await runtime.called.wait()
    # A turn of this session a killed process left open (its row, no slot, no messages).
    operator = api.services.db.call(lambda s: s.scalar(select(OpenTurn.operator_id)))
    api.services.db.call(
        lambda s: s.add(
            OpenTurn(
                turn_id="dead0000000000000000000000000000",
                operator_id=operator,
                session_id=session,
                message="asked before the kill",
                started_at=utcnow(),
            )
        )
    )

    assert await turns.note_left_turns() == 1  # the dead one; the running one is left
    assert await turns.note_left_turns() == 0
    assert open_turns(api) == [started["turn_id"]]
    gate.set()
    assert (await read_sse(stream))[-1]["type"] == "done"

    assert open_turns(api) == []
    shown = (await (await api.get(f"/api/operator/chat/session/{session}")).json())["messages"]
    assert [(m["role"], m["content"]) for m in shown] == [
        ("user", "asked before the kill"),
        ("assistant", OWNER_GONE_REPLY),
        ("user", "held"),
        ("assistant", "Answered."),
    ]
    assert shown[1]["meta"]["kind"] == CUT_KIND
