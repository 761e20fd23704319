"""Requests not yet answered go first (bot.unanswered): a started chat turn waits, before its
retrieval and model call, while any request has not had its first byte, for at most
`max_wait`; a stream counts as answered at its first frame."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from bot.unanswered import Unanswered
from tests.conftest import ApiClient, frames_until, make_settings, read_sse
from tests.fakes.lifecycle import PATIENCE_SECONDS, wait_for
from tests.fakes.runtimes import ScriptedRuntime

# A `max_wait` no turn here reaches: one let go went because it was its turn, not because it
# was overdue. Each wait for a turn to go stays under it, so an overdue turn cannot pass.
NEVER_OVERDUE = 10 * PATIENCE_SECONDS


async def test_quiet_returns_at_once_with_nothing_unanswered() -> None:
    await asyncio.wait_for(Unanswered().quiet(), timeout=PATIENCE_SECONDS)


async def test_quiet_waits_for_the_last_answer() -> None:
    unanswered = Unanswered(max_wait=NEVER_OVERDUE)
    unanswered.arrived()
    unanswered.arrived()
    waiting = asyncio.ensure_future(unanswered.quiet())
    unanswered.answered()
    await wait_for(lambda: unanswered.waiting == 1, within=PATIENCE_SECONDS)
    assert not waiting.done()  # one request is still waiting
    unanswered.answered()
    await asyncio.wait_for(waiting, timeout=PATIENCE_SECONDS)


async def test_a_request_that_is_never_answered_delays_quiet_by_max_wait_only() -> None:
    unanswered = Unanswered(max_wait=0.2)
    unanswered.arrived()
    await asyncio.wait_for(unanswered.quiet(), timeout=PATIENCE_SECONDS)
    assert unanswered.count == 1


async def test_a_turn_asks_its_model_only_once_waiting_requests_are_answered(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime([[Delta("hello")]])
    api: ApiClient = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    unanswered = api.services.unanswered
    unanswered.max_wait = NEVER_OVERDUE
    unanswered.arrived()  # a request elsewhere that has not had its first byte
    response = await api.post("/api/operator/chat/stream", json={"message": "hi"})
    first = await frames_until(response, lambda f: f["type"] == "status")
    assert first[0]["text"] == "turn started"  # the first frame is not held back
    await wait_for(lambda: unanswered.waiting == 1, within=PATIENCE_SECONDS)  # the turn yields here
    assert runtime.requests == []  # the model call waits
    unanswered.answered()
    frames = await read_sse(response)
    assert frames[-1]["type"] == "done"
    assert len(runtime.requests) == 1


async def test_every_answer_is_counted_once_streams_at_their_first_frame(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("hello")]], gate=gate)
    api: ApiClient = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": "hi"})
    await frames_until(response, lambda f: f["type"] == "status")
    assert api.services.unanswered.count == 0  # streaming, but answered
    refused = await api.post("/api/operator/chat", json={"message": ""})
    assert refused.status == 400
    await api.get("/api/operator/chat/sessions")
    assert api.services.unanswered.count == 0
    gate.set()
    assert (await read_sse(response))[-1]["type"] == "done"
    assert api.services.unanswered.count == 0


async def test_a_blocking_turn_does_not_wait_on_its_own_request(
    api_factory: Any, tmp_path: Path
) -> None:
    # The blocking endpoint answers only when its turn is done: counted as unanswered until
    # then, its own turn would yield to it for the whole `max_wait`.
    runtime = ScriptedRuntime([[Delta("hello")]])
    api: ApiClient = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    api.services.unanswered.max_wait = NEVER_OVERDUE
    answer = await asyncio.wait_for(
        api.post("/api/operator/chat", json={"message": "hi"}), timeout=PATIENCE_SECONDS
    )
    assert answer.status == 200
    assert api.services.unanswered.count == 0


async def test_turns_held_by_a_burst_go_one_at_a_time_oldest_first() -> None:
    # Let go all at once, the held turns would start together and the requests arriving
    # meanwhile would wait for all of them.
    unanswered = Unanswered(max_wait=NEVER_OVERDUE, tick=0.5)
    unanswered.arrived()
    gone: list[tuple[int, int]] = []  # (which turn, how many still waited as it went on)

    async def turn(number: int) -> None:
        await unanswered.quiet()
        for _ in range(3):  # a few turns of the loop, far shorter than a tick
            await asyncio.sleep(0)
        gone.append((number, unanswered.waiting))

    turns = []
    for number in range(3):
        turns.append(asyncio.ensure_future(turn(number)))
        await wait_for(lambda: unanswered.waiting == len(turns), within=PATIENCE_SECONDS)
    unanswered.answered()
    await asyncio.wait_for(asyncio.gather(*turns), timeout=PATIENCE_SECONDS)
    assert [number for number, _ in gone] == [0, 1, 2]
    assert gone[0][1] == 2  # the first went on alone


async def test_a_turn_waits_while_the_loop_runs_late_then_goes_when_overdue() -> None:
    # Requests whose connections wait in the accept queue are not counted; a loop that runs
    # late is how they show. Here every turn of the loop takes 20 ms of CPU.
    unanswered = Unanswered(max_wait=0.5, tick=0.001, lag=0.005)
    loop = asyncio.get_running_loop()
    busy = True

    def hog() -> None:
        if unanswered.count:  # from the loop's first late turn on, nothing is unanswered
            unanswered.answered()
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass
        if busy:
            loop.call_soon(hog)

    unanswered.arrived()
    held = asyncio.ensure_future(_timed(unanswered.quiet()))
    await wait_for(lambda: unanswered.waiting == 1, within=PATIENCE_SECONDS)
    loop.call_soon(hog)  # only the late loop holds the turn from there
    try:
        waited = await asyncio.wait_for(held, timeout=PATIENCE_SECONDS)
    finally:
        busy = False
    assert waited >= 0.5  # let go only when overdue


async def test_a_held_turn_that_is_cancelled_does_not_hold_the_next() -> None:
    unanswered = Unanswered(max_wait=NEVER_OVERDUE)
    unanswered.arrived()
    first = asyncio.ensure_future(unanswered.quiet())
    second = asyncio.ensure_future(unanswered.quiet())
    await wait_for(lambda: unanswered.waiting == 2, within=PATIENCE_SECONDS)
    first.cancel()
    unanswered.answered()
    await asyncio.wait_for(second, timeout=PATIENCE_SECONDS)
    assert unanswered.waiting == 0


async def _timed(waiting: Any) -> float:
    began = time.monotonic()
    await waiting
    return time.monotonic() - began
