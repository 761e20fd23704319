"""A `steelframe serve` killed mid-turn (SIGKILL: an OOM kill, a crash) cannot end its turn;
a client re-attaching through another serve on the same Redis and database reads the turn's
end anyway, once the turn's slot lapses (a short `STEELFRAME_CHAT_TURN_SLOT_TTL_SECONDS`
here), instead of keep-alives until the relayed frames expire two minutes later; the
session no longer names the turn as in flight, and keeps the operator's message with a note
that the turn did not complete, written once by the reader that ended it. Real serve
processes, a model (the fake OpenAI server) that holds its answer for good."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.chat.frames import PREFIX, NumberedFrame
from bot.chat.turn import CUT_KIND, OWNER_GONE_REPLY
from bot.redis_clients import CancellableRedis
from tests.fakes import held_turns
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.serve_process import serve

pytestmark = pytest.mark.slow  # real serve processes


@pytest.fixture
async def setup(tmp_path: Path, redis_url: str, aiohttp_server: Any) -> held_turns.HeldTurnSetup:
    # Renewed every third of it while its serve lives; lapses a second after a kill.
    return await held_turns.held_turn_setup(
        tmp_path, redis_url, aiohttp_server, STEELFRAME_CHAT_TURN_SLOT_TTL_SECONDS="1"
    )


async def _relayed(redis_url: str, turn: str, frame_id: int) -> None:
    """Until the turn's relayed frames in Redis reach `frame_id` (XREAD blocks for them)."""
    position = "0-0"
    async with CancellableRedis.from_url(redis_url) as client, asyncio.timeout(PATIENCE_SECONDS):
        while True:
            answer = await client.xread({f"{PREFIX}frames:{turn}": position}, block=1000)
            for _stream, entries in answer:
                for entry_id, fields in entries:
                    position = entry_id
                    if NumberedFrame.stored(fields[b"f"]).id >= frame_id:
                        return


async def test_a_turn_of_a_killed_serve_ends_for_a_client_reattaching_elsewhere(
    setup: held_turns.HeldTurnSetup, tmp_path: Path
) -> None:
    async with serve(setup.settings, tmp_path, tmp_path / "serve-1.log") as first:
        headers = held_turns.operator_headers(setup.database)
        async with held_turns.held_turn(first, headers, setup.model) as held:
            turn, session, last = held.turn, held.session, held.last
            assert last, "the turn relayed no frame before its model call"
            # The relay writes in batches: the frames a client saw here are in Redis before
            # the kill (else there is no turn to find elsewhere, as after a kill that beat it).
            await _relayed(setup.settings["STEELFRAME_REDIS_URL"], turn, last)
            first.process.kill()  # SIGKILL: nothing of the serve runs after this
            await first.process.wait()
    async with serve(setup.settings, tmp_path, tmp_path / "serve-2.log") as second:
        frames = await held_turns.reattached(second, headers, turn=turn, after=last)
        assert len(frames) == 1, frames
        [end] = frames
        assert (end["type"], end["reason"], end["id"]) == ("error", "cancelled", last + 1), end
        assert "service stopped" in end["error"] and "went away" in end["error"], end
        stored = await held_turns.stored_session(second, headers, session)
        assert stored["turn_in_flight"] is None
        # The reader that ended the turn recorded it: the message, and why it has no answer.
        user, note = stored["messages"]
        assert (user["role"], user["content"]) == ("user", held_turns.MESSAGE)
        assert (note["role"], note["content"]) == ("assistant", OWNER_GONE_REPLY)
        assert note["meta"]["kind"] == CUT_KIND
        assert stored["title"]  # the message titles the session, as an answered turn's does
        # Another client re-attaching later reads the same end, and records nothing more.
        assert await held_turns.reattached(second, headers, turn=turn, after=last) == frames
        again = await held_turns.stored_session(second, headers, session)
        assert again["messages"] == stored["messages"]
    log = second.log_text()
    assert "Traceback" not in log, log[-2000:]
