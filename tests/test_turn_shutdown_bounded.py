"""Ending the turns at shutdown is bounded: a Redis that stopped answering (a listener that
never answers, as a frozen redis-server looks to a client) and a session store that never
answers cost a logged line each, never a shutdown that hangs."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any

import pytest

from bot.chat import frame_outbox, inflight
from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.inflight import TurnHandle, TurnRegistry
from bot.chat.turn import CUT_REPLY
from bot.contracts.chat import ErrorFrame, ErrorReason
from operator_api.deps import OPERATOR_API
from tests.conftest import make_settings
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply

# Far above the bounds set below (a second or two in all), for a loaded machine; far below
# "for good".
BOUND_SECONDS = 30.0


async def _held(handle: TurnHandle) -> None:
    await asyncio.Event().wait()  # a model that never answers


async def _never_recorded(handle: TurnHandle) -> None:
    await asyncio.Event().wait()  # a database that never answers


@pytest.mark.parametrize("frame_written_within_the_bound", [True, False])
async def test_cutting_turns_on_a_silent_redis_and_database_ends_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    frame_written_within_the_bound: bool,
) -> None:
    monkeypatch.setattr(frame_outbox, "WRITE_TIMEOUT", 0.5)
    monkeypatch.setattr(inflight, "CUT_RECORD_SECONDS", 0.2)
    # The frame's write gives up after 0.5 s: within a 5 s bound, past a 0.1 s one.
    monkeypatch.setattr(inflight, "CUT_SECONDS", 5.0 if frame_written_within_the_bound else 0.1)
    caplog.set_level(logging.INFO, logger="bot.chat.inflight")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        relay = RedisFrameRelay(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", linger=60)
        registry = TurnRegistry(relay=relay)
        handle = registry.reserve(turn_id="t1", operator_id=1)
        handle.on_cut = _never_recorded
        registry.launch(handle, session_id="s1", run=_held)
        await asyncio.sleep(0)  # the turn runs
        await asyncio.wait_for(registry.shut_down(grace=0.1), BOUND_SECONDS)
        await asyncio.wait_for(registry.close(), BOUND_SECONDS)
        if not frame_written_within_the_bound:  # it ends with the relay's close
            assert handle.task is not None
            await asyncio.wait_for(handle.task, BOUND_SECONDS)
    log = caplog.text
    assert "its cut was not recorded in its session" in log
    assert ("its end was not recorded within" in log) is not frame_written_within_the_bound
    # In this process the turn ended as the service stopping ends it: a re-attach here reads it.
    last = handle.frames[-1].frame
    assert isinstance(last, ErrorFrame) and last.reason is ErrorReason.CANCELLED
    with pytest.raises(Exception, match="shutting down"):  # no new turn once stopping
        registry.reserve(turn_id="t2", operator_id=2)


async def test_a_blocking_turn_the_service_cuts_answers_503_and_its_session_says_so(
    api_factory: Any, tmp_path: Path
) -> None:
    """The blocking endpoint's client is told to send again (503, `turn_cancelled`), not
    that the service failed (500); the session keeps the message and the cut's note."""
    runtime = ScriptedRuntime([reply("never shown")], gate=asyncio.Event())
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    sending = asyncio.create_task(api.post("/api/operator/chat", json={"message": "still there?"}))
    await asyncio.wait_for(runtime.called.wait(), PATIENCE_SECONDS)
    await api.raw.app[OPERATOR_API].registry.shut_down(grace=0.0)
    answer = await asyncio.wait_for(sending, PATIENCE_SECONDS)
    body = await answer.json()
    assert (answer.status, body["code"], body["detail"]["reason"]) == (
        503,
        "turn_cancelled",
        "cancelled",
    )
    assert "the service stopped" in body["error"]
    session = await (
        await api.get(f"/api/operator/chat/session/{body['detail']['session']}")
    ).json()
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", "still there?"),
        ("assistant", CUT_REPLY),
    ]
    refused = await api.post("/api/operator/chat", json={"message": "and now?"})
    assert refused.status == 503  # no new turn once stopping
