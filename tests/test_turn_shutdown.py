"""A `steelframe serve` told to stop (SIGTERM: a deploy, a restart) under a running chat
turn ends that turn for everyone: the turn's stream ends with an `error` frame whose reason,
`cancelled`, says the service stopped it (not its operator), written through to Redis before
the relay closes, so a client re-attaching through the next serve on the same Redis reads it
instead of waiting for frames that never come; and the session keeps the operator's message
with a note that the turn did not complete. Real serve processes, a model (the fake OpenAI
server) that holds its answer for good."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from bot.chat.turn import CUT_KIND, CUT_REPLY
from tests.fakes import held_turns
from tests.fakes.serve_process import Served, serve

pytestmark = pytest.mark.slow  # real serve processes

# Below aiohttp's own shutdown wait (60 s), which a watched turn that nothing ends waits
# out; far above the second or two a stop takes here, for a loaded machine.
EXIT_BOUND_SECONDS = 30.0


@pytest.fixture
async def setup(tmp_path: Path, redis_url: str, aiohttp_server: Any) -> held_turns.HeldTurnSetup:
    return await held_turns.held_turn_setup(
        tmp_path, redis_url, aiohttp_server, STEELFRAME_SHUTDOWN_GRACE_SECONDS="1"
    )


async def _stopped(served: Served, *, signalled: bool = False) -> None:
    if not signalled:
        served.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(served.process.wait(), EXIT_BOUND_SECONDS)
    log = served.log_text()
    assert code == 0, log[-2000:]
    assert "Traceback" not in log, log[-2000:]


def _says_the_service_stopped(frame: dict[str, Any]) -> None:
    assert frame["type"] == "error", frame
    assert frame["reason"] == "cancelled", frame  # the service, not the operator ("stopped")
    assert "service stopped" in frame["error"], frame


def _only_status_before_the_model(held: held_turns.HeldTurn) -> None:
    """The turn's frames until its model call are status frames."""
    for frame in held.seen:
        assert frame["type"] == "status", frame


async def _after_restart(
    setup: held_turns.HeldTurnSetup,
    tmp_path: Path,
    headers: dict[str, str],
    *,
    held: held_turns.HeldTurn,
) -> None:
    """Through a second serve on the same Redis and database: re-attaching reads the turn's
    end, and the session keeps the message and says the turn did not complete."""
    async with serve(setup.settings, tmp_path, tmp_path / "serve-2.log") as second:
        frames = await held_turns.reattached(second, headers, turn=held.turn, after=held.last)
        assert len(frames) == 1, frames
        _says_the_service_stopped(frames[0])
        stored = await held_turns.stored_session(second, headers, held.session)
        assert stored["turn_in_flight"] is None
        user, note = stored["messages"]
        assert (user["role"], user["content"]) == ("user", held_turns.MESSAGE)
        assert (note["role"], note["content"]) == ("assistant", CUT_REPLY)
        assert note["meta"]["kind"] == CUT_KIND
        assert stored["title"]  # the message titles the session, as an answered turn's does


async def test_a_watched_turn_cut_by_shutdown_ends_for_its_client_and_after_restart(
    setup: held_turns.HeldTurnSetup, tmp_path: Path
) -> None:
    """The operator watches the turn as the service stops: past the grace the turn ends on
    the stream they have (not cut off after aiohttp's minute, which a supervisor's SIGKILL
    comes before), and the next serve gives the same end."""
    async with serve(setup.settings, tmp_path, tmp_path / "serve-1.log") as first:
        headers = held_turns.operator_headers(setup.database)
        async with held_turns.held_turn(first, headers, setup.model) as held:
            _only_status_before_the_model(held)
            first.process.send_signal(signal.SIGTERM)
            rest = await asyncio.wait_for(held_turns.frames_to_end(held.stream), EXIT_BOUND_SECONDS)
        assert rest, "the stream ended without the turn's end"
        _says_the_service_stopped(rest[-1])
        await _stopped(first, signalled=True)
    assert setup.model.requests[0].client_gone.is_set()  # the model call was closed too
    await _after_restart(setup, tmp_path, headers, held=held)


async def test_a_turn_nobody_watches_cut_by_shutdown_ends_for_a_client_after_restart(
    setup: held_turns.HeldTurnSetup, tmp_path: Path
) -> None:
    """The operator closed the tab mid-turn; the service stops, then comes back: reopening
    the chat re-attaches to a turn that has ended, and says why."""
    async with serve(setup.settings, tmp_path, tmp_path / "serve-1.log") as first:
        headers = held_turns.operator_headers(setup.database)
        async with held_turns.held_turn(first, headers, setup.model) as held:
            _only_status_before_the_model(held)
        await _stopped(first)
    await _after_restart(setup, tmp_path, headers, held=held)
