"""`forget that <words>` reaches what Chat holds besides its stored sessions: the turns'
frames relayed through Redis and held by the instance (a re-attach, here or through
another instance, reads them without the words), a turn running while the forget ran
(it stores, answers and relays its messages without them), and the other operators'
clients (told on their events stream to read their changed sessions again); run while
Redis is away, all of it once Redis is back. The real app on PostgreSQL and Redis, two
instances in one process (bot/chat/forgotten_frames.py, bot/chat/pending_forgets.py,
bot/chat/forget_delivery.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis import Redis as SyncRedis
from sqlalchemy import select

from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.frames import PREFIX, NumberedFrame, OrphanedTurn
from bot.chat.open_turn_rows import OpenTurn
from bot.chat.pending_forgets import PendingForget, current_epoch
from bot.chat.turn import OWNER_GONE_REPLY
from bot.clock import utcnow
from bot.contracts.chat import DeltaFrame, StatusFrame
from bot.contracts.events import SessionFrame
from bot.models import ChatSession, ChatTurn, Operator
from bot.runtimes.base import Delta, RuntimeEvent, RuntimeRequest
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.lifecycle import wait_for
from tests.fakes.own_redis import OwnRedis
from tests.fakes.own_redis import own_redis_fixture as own_redis_fixture  # `own_redis`
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply

SECRET = "the deploy password is hunter2"
HOLD = "[hold]"  # a message with this waits at the model until the test lets it go


@dataclass
class EchoRuntime:
    """Answers each message by saying the secret back when it was asked, in small pieces
    (the words are cut between two `delta` frames); a message with HOLD waits at the model
    for `gate`, `held` set once it does."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    held: asyncio.Event = field(default_factory=asyncio.Event)
    name: str = "echo"
    model: str = "echo-model"

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        asked = request.messages[-1].content
        if HOLD in asked:
            self.held.set()
            await self.gate.wait()
        said = f"Noted: {SECRET}." if "hunter2" in asked else "Done."
        async for event in ScriptedRuntime([reply(said, pieces=9)]).stream(request):
            yield event


@pytest.fixture
def runtime() -> EchoRuntime:
    return EchoRuntime()


@pytest.fixture
def instances(
    api_factory: Callable[..., Any], pg_url: str, redis_url: str, tmp_path: Path, runtime: Any
) -> Callable[[], Any]:
    settings = make_settings(tmp_path, database_url=pg_url, redis_url=redis_url)

    async def instance() -> ApiClient:
        client: ApiClient = await api_factory(settings, runtimes=lambda agent: runtime)
        return client

    return instance


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def _say(api: ApiClient, message: str) -> dict[str, Any]:
    turn = await api.post("/api/operator/chat", json={"message": message})
    assert turn.status == 200, await turn.text()
    return dict(await turn.json())


async def _relayed(redis: aioredis.Redis, turn_id: str) -> list[tuple[bytes, dict[str, Any]]]:
    entries = await redis.xrange(f"{PREFIX}frames:{turn_id}")
    return [(entry_id, json.loads(fields[b"f"])) for entry_id, fields in entries]


def _deltas(frames: Sequence[dict[str, Any]]) -> str:
    return "".join(frame["text"] for frame in frames if frame["type"] == "delta")


async def _reattached(api: ApiClient, session: str) -> list[dict[str, Any]]:
    """The session's latest turn, read again from its first frame (as after a reload)."""
    again = await api.get(
        f"/api/operator/chat/stream?session={session}", headers=api.headers({"Last-Event-ID": "0"})
    )
    assert again.status == 200, await again.text()
    return await read_sse(again)


def _operator_id(api: ApiClient, name: str) -> int:
    found = api.services.db.call(
        lambda s: s.scalar(select(Operator.id).where(Operator.name == name))
    )
    assert found is not None
    return int(found)


def _kept(api: ApiClient) -> str:
    """Everything the database keeps of the chat messages and of the turns kept open."""

    def read(session: Any) -> list[Any]:
        return [
            [(t.content, t.reasoning, t.meta) for t in session.scalars(select(ChatTurn))],
            [t.message for t in session.scalars(select(OpenTurn))],
        ]

    return json.dumps(api.services.db.call(read))


def _pending(api: ApiClient) -> list[str]:
    """The words of the forgets turns in flight still owe (bot.chat.pending_forgets)."""
    return list(api.services.db.call(lambda s: list(s.scalars(select(PendingForget.words)))))


async def test_forget_takes_the_words_out_of_relayed_and_held_frames_and_tells_other_clients(
    instances: Callable[[], Any], redis: aioredis.Redis
) -> None:
    api, elsewhere = await instances(), await instances()
    other = api.new_operator("other")
    theirs = await _say(other, f"Remember: {SECRET}.")
    before = await _relayed(redis, theirs["turn_id"])
    assert "hunter2" in json.dumps([frame for _, frame in before])
    pieces = [frame["text"] for _, frame in before if frame["type"] == "delta"]
    assert "hunter2" in "".join(pieces) and not any("hunter2" in p for p in pieces)  # cut
    events = api.services.events
    other_id = _operator_id(api, "other")
    seen = await events.log.last_id(other_id)

    forget = await _say(api, f"forget that {SECRET}")

    after = await _relayed(redis, theirs["turn_id"])
    assert [entry_id for entry_id, _ in after] == [entry_id for entry_id, _ in before]
    assert [frame["id"] for _, frame in after] == [frame["id"] for _, frame in before]
    assert "hunter2" not in json.dumps([frame for _, frame in after])
    assert _deltas([frame for _, frame in after]) == "Noted: [forgotten]."
    assert after[0][1]["session"] == theirs["session"]  # still names its turn and session
    ours = await _relayed(redis, forget["turn_id"])  # the forget turn's own frames too
    assert "hunter2" not in json.dumps([frame for _, frame in ours]), ours
    # Read again through the instance that ran it (its own copy) and through another (Redis).
    for instance in (api, elsewhere):
        frames = await _reattached(instance.as_operator(other.token), theirs["session"])
        assert frames[-1]["type"] == "done", frames
        assert "hunter2" not in json.dumps(frames), frames
    # The other operator's clients are told their session changed.
    told = await events.log.read(other_id, seen, wait=PATIENCE_SECONDS)
    changed = [event.frame for event in told.events if isinstance(event.frame, SessionFrame)]
    assert [(f.session_id, f.change) for f in changed] == [(theirs["session"], "forgotten")]
    assert "hunter2" not in _kept(api)
    assert _pending(api) == []  # nothing in flight: the words are kept nowhere


async def test_a_turn_running_during_the_forget_stores_and_answers_without_the_words(
    instances: Callable[[], Any], redis: aioredis.Redis, runtime: EchoRuntime
) -> None:
    api, elsewhere = await instances(), await instances()
    theirs = elsewhere.as_operator(api.new_operator("other").token)  # runs on the other
    running = asyncio.create_task(_say(theirs, f"{HOLD} Is it true that {SECRET}?"))
    async with asyncio.timeout(PATIENCE_SECONDS):
        await runtime.held.wait()  # its history and its message are read: it runs

    forget = await _say(api, f"forget that {SECRET}")
    assert "hunter2" not in _kept(api)  # its kept-open message too (a kill would note it)
    assert _pending(api) == [SECRET]  # kept for the turn that owes it
    runtime.gate.set()
    answered = await running

    assert "hunter2" not in json.dumps(answered), answered
    assert answered["reply"].startswith("Noted: [forgotten].")
    assert answered["history"][-2]["content"] == f"{HOLD} Is it true that [forgotten]?"
    assert "hunter2" not in _kept(api)
    assert _pending(api) == []  # let go by the last turn that owed them
    for turn_id in (answered["turn_id"], forget["turn_id"]):
        relayed = await _relayed(redis, turn_id)
        assert "hunter2" not in json.dumps([frame for _, frame in relayed]), relayed
    frames = await _reattached(elsewhere.as_operator(theirs.token), answered["session"])
    assert "hunter2" not in json.dumps(frames), frames


def _says_secret(api: ApiClient, turn_id: str) -> bool:
    """Whether the instance's own copy of the turn's frames (not Redis's) says the words."""
    handle = api.services.registry.held(turn_id)
    assert handle is not None, "the instance holds the turn's frames"
    return "hunter2" in json.dumps([numbered.data.decode() for numbered in handle.frames])


async def test_another_instance_takes_the_words_out_of_the_frames_it_holds(
    instances: Callable[[], Any],
) -> None:
    api, elsewhere = await instances(), await instances()
    theirs = elsewhere.as_operator(api.new_operator("other").token)  # runs on the other
    said = await _say(theirs, f"Remember: {SECRET}.")
    assert _says_secret(elsewhere, said["turn_id"])  # its own copy, for a re-attach there

    await _say(api, f"forget that {SECRET}")

    # Told over Redis: a moment, not its linger (120 s).
    await wait_for(lambda: not _says_secret(elsewhere, said["turn_id"]), within=PATIENCE_SECONDS)
    frames = await _reattached(theirs, said["session"])
    assert frames[-1]["type"] == "done", frames
    assert "hunter2" not in json.dumps(frames), frames
    assert _deltas(frames) == "Noted: [forgotten]."  # the pieces cut through it, as one


async def test_frames_waiting_for_redis_are_written_without_the_words(
    api_factory: Callable[..., Any],
    pg_url: str,
    own_redis: OwnRedis,
    tmp_path: Path,
    runtime: EchoRuntime,
) -> None:
    settings = make_settings(tmp_path, database_url=pg_url, redis_url=own_redis.url)
    api: ApiClient = await api_factory(settings, runtimes=lambda agent: runtime)
    relay = api.services.registry.relay
    assert isinstance(relay, RedisFrameRelay)
    own_redis.stop_keeping_data()
    said = await _say(api.new_operator("other"), f"Remember: {SECRET}.")
    assert relay.held > 0  # its frames wait here for Redis

    await _say(api, f"forget that {SECRET}")
    own_redis.start()
    await wait_for(lambda: relay.held == 0, within=PATIENCE_SECONDS)  # all written

    async with aioredis.Redis.from_url(own_redis.url) as redis:
        relayed = await _relayed(redis, said["turn_id"])
    assert relayed, "its frames were written once Redis was back"
    assert "hunter2" not in json.dumps([frame for _, frame in relayed]), relayed
    assert _deltas([frame for _, frame in relayed]) == "Noted: [forgotten]."


def _relayed_now(url: str, turn_id: str) -> str:
    """The turn's frames as Redis relays them ("" while there are none)."""
    with SyncRedis.from_url(url) as client:  # a wait's look, in a thread
        entries = client.xrange(f"{PREFIX}frames:{turn_id}")
    return json.dumps([fields[b"f"].decode() for _, fields in entries])


async def _read_again(api: ApiClient, turn_id: str) -> str:
    """The turn read again from its first frame through the instance (as after a reload)."""
    again = await api.get(
        f"/api/operator/chat/stream?turn={turn_id}", headers=api.headers({"Last-Event-ID": "0"})
    )
    assert again.status == 200, await again.text()
    frames = await read_sse(again)
    assert frames[-1]["type"] == "done", frames
    return json.dumps(frames)


async def test_a_forget_made_while_redis_is_away_reaches_the_other_instances_frames(
    api_factory: Callable[..., Any],
    pg_url: str,
    own_redis: OwnRedis,
    tmp_path: Path,
    runtime: EchoRuntime,
) -> None:
    settings = make_settings(tmp_path, database_url=pg_url, redis_url=own_redis.url)
    api: ApiClient = await api_factory(settings, runtimes=lambda agent: runtime)
    elsewhere: ApiClient = await api_factory(settings, runtimes=lambda agent: runtime)
    theirs = elsewhere.as_operator(api.new_operator("other").token)  # runs on the other
    relay = elsewhere.services.registry.relay
    assert isinstance(relay, RedisFrameRelay)
    before = (await _say(theirs, f"Remember: {SECRET}."))["turn_id"]  # held there, relayed
    assert _says_secret(elsewhere, before) and "hunter2" in _relayed_now(own_redis.url, before)
    own_redis.stop_keeping_data()
    during = (await _say(theirs, f"Again: {SECRET}."))["turn_id"]  # kept there for Redis
    assert relay.held > 0

    await _say(api, f"forget that {SECRET}")
    assert _says_secret(elsewhere, before)  # not told while Redis is away
    own_redis.start()

    def reached() -> bool:
        relayed = [_relayed_now(own_redis.url, turn_id) for turn_id in (before, during)]
        return (
            relay.held == 0
            and all(relayed)  # written, the one kept for Redis too
            and not any("hunter2" in frames for frames in relayed)
            and not any(_says_secret(elsewhere, turn_id) for turn_id in (before, during))
        )

    await wait_for(reached, within=PATIENCE_SECONDS)
    for instance in (elsewhere, api):  # its own copy there, Redis's here
        for turn_id in (before, during):
            frames = await _read_again(instance.as_operator(theirs.token), turn_id)
            assert "hunter2" not in frames, frames


async def test_the_words_a_killed_turn_owed_go_at_another_instances_second_look(
    instances: Callable[[], Any],
) -> None:
    api, elsewhere = await instances(), await instances()
    said = await _say(api, "Hello.")
    epoch = api.services.db.call(current_epoch)
    operator_id = api.services.db.call(lambda s: s.get(ChatSession, said["session"]).operator_id)
    # A turn of that session whose process was killed mid-turn: its row, no slot.
    api.services.db.call(
        lambda s: s.add(
            OpenTurn(
                turn_id="dead0000000000000000000000000000",
                operator_id=operator_id,
                session_id=said["session"],
                message="asked before the kill",
                started_at=utcnow(),
                forget_epoch=epoch,
            )
        )
    )
    await _say(api, f"forget that {SECRET}")
    assert _pending(api) == [SECRET]  # the killed turn owes them: it might still store
    ends = elsewhere.services.chat_turns.ends

    suspects = await ends.sweep_left_turns(set())
    assert suspects == {"dead0000000000000000000000000000"}
    assert _pending(api) == [SECRET]  # one look does not note a turn: it may be ending
    assert await ends.sweep_left_turns(suspects) == set()

    assert _pending(api) == []
    assert api.services.db.call(lambda s: list(s.scalars(select(OpenTurn.turn_id)))) == []
    shown = await (await api.get(f"/api/operator/chat/session/{said['session']}")).json()
    noted = [(m["role"], m["content"]) for m in shown["messages"]][-2:]
    assert noted == [("user", "asked before the kill"), ("assistant", OWNER_GONE_REPLY)]


@dataclass
class SpeakingRuntime:
    """Held at the model until `gate`; then it says the secret in pieces (`spoke` set once
    they are out) and, with `fails`, fails (a turn that ends without storing its messages),
    else waits for good (a turn the service cuts as it stops)."""

    fails: bool = False
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    held: asyncio.Event = field(default_factory=asyncio.Event)
    spoke: asyncio.Event = field(default_factory=asyncio.Event)
    name: str = "speaking"
    model: str = "speaking-model"

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        self.held.set()
        await self.gate.wait()
        for event in reply(f"Noted: {SECRET}.", pieces=9):
            if isinstance(event, Delta):  # the reply's pieces, and no end
                yield event
        self.spoke.set()  # the last piece was taken (and emitted) before this runs
        if self.fails:
            raise RuntimeError("the model went away")
        await asyncio.Event().wait()
        yield event  # never reached


async def test_a_turn_that_fails_after_the_forget_keeps_no_words_in_its_frames(
    api_factory: Callable[..., Any], pg_url: str, redis_url: str, tmp_path: Path, redis: Any
) -> None:
    """Its frames streamed after the forget, said the words, and it stored nothing: its
    frames here and relayed are read again without them (as a turn that stores does)."""
    failing = SpeakingRuntime(fails=True)
    settings = make_settings(tmp_path, database_url=pg_url, redis_url=redis_url)
    api: ApiClient = await api_factory(settings, runtimes=lambda agent: EchoRuntime())
    elsewhere: ApiClient = await api_factory(settings, runtimes=lambda agent: failing)
    await _say(api, "Hello.")  # the forget's session, on the first instance
    theirs = elsewhere.as_operator(api.new_operator("other").token)
    running = asyncio.create_task(theirs.post("/api/operator/chat", json={"message": "go on"}))
    async with asyncio.timeout(PATIENCE_SECONDS):
        await failing.held.wait()
    [handle] = elsewhere.services.registry.handles()

    await _say(api, f"forget that {SECRET}")
    assert _pending(api) == [SECRET]  # the turn running elsewhere owes them
    failing.gate.set()
    failed = await running
    assert failed.status >= 400, await failed.text()
    assert handle.finished

    held = [json.loads(numbered.data) for numbered in handle.frames]  # for a re-attach here
    assert "hunter2" not in _deltas(held), held  # said across the pieces
    relayed = [frame for _, frame in await _relayed(redis, handle.turn_id)]
    assert relayed and relayed[-1]["type"] == "error", relayed
    assert "hunter2" not in _deltas(relayed), relayed
    assert _pending(api) == []  # let go as it ended


async def test_a_turn_cut_after_the_forget_keeps_no_words_in_its_relayed_frames(
    api_factory: Callable[..., Any], pg_url: str, redis_url: str, tmp_path: Path, redis: Any
) -> None:
    """Its pieces streamed after the forget said the words; the service stopping cut it:
    its note leaves them out, and so do its frames another instance reads again."""
    speaking = SpeakingRuntime()
    settings = make_settings(tmp_path, database_url=pg_url, redis_url=redis_url)
    api: ApiClient = await api_factory(settings, runtimes=lambda agent: EchoRuntime())
    elsewhere: ApiClient = await api_factory(settings, runtimes=lambda agent: speaking)
    await _say(api, "Hello.")
    theirs = elsewhere.as_operator(api.new_operator("other").token)
    running = asyncio.create_task(theirs.post("/api/operator/chat", json={"message": "go on"}))
    async with asyncio.timeout(PATIENCE_SECONDS):
        await speaking.held.wait()
    [handle] = elsewhere.services.registry.handles()
    await _say(api, f"forget that {SECRET}")
    speaking.gate.set()
    async with asyncio.timeout(PATIENCE_SECONDS):
        await speaking.spoke.wait()

    await elsewhere.services.registry.shut_down(grace=0.1)
    await running
    assert handle.finished and handle.cut

    relayed = [frame for _, frame in await _relayed(redis, handle.turn_id)]
    assert relayed and relayed[-1]["type"] == "error", relayed
    assert "hunter2" not in _deltas(relayed), relayed
    assert "hunter2" not in _kept(api)
    assert _pending(api) == []


async def test_a_killed_turns_frames_lose_the_words_it_owed_when_a_reader_ends_it(
    instances: Callable[[], Any], redis: aioredis.Redis
) -> None:
    """A turn's instance relayed pieces saying the words after the forget, then was killed:
    the reader that ends it (`record_owner_gone`) leaves them out of its note and of its
    relayed frames, which other readers read again until they lapse."""
    api = await instances()
    said = await _say(api, "Hello.")
    session_id = said["session"]
    operator_id = api.services.db.call(lambda s: s.get(ChatSession, session_id).operator_id)
    turn_id = "dead1111111111111111111111111111"
    epoch = api.services.db.call(current_epoch)
    api.services.db.call(
        lambda s: s.add(
            OpenTurn(
                turn_id=turn_id,
                operator_id=operator_id,
                session_id=session_id,
                message="go on",
                started_at=utcnow(),
                forget_epoch=epoch,
            )
        )
    )
    relay = api.services.registry.relay
    assert relay is not None
    started = StatusFrame(text="turn started", session=session_id, turn_id=turn_id, message="go on")
    await relay.publish(operator_id, turn_id, session_id, NumberedFrame.of(1, started))
    await _say(api, f"forget that {SECRET}")
    assert _pending(api) == [SECRET]
    pieces = [event for event in reply(f"Noted: {SECRET}.", pieces=9) if isinstance(event, Delta)]
    for number, piece in enumerate(pieces, start=2):  # relayed after the forget, then killed
        frame = NumberedFrame.of(number, DeltaFrame(text=piece.text, draft=1))
        await relay.publish(operator_id, turn_id, session_id, frame)

    ended = OrphanedTurn(operator_id, turn_id, session_id, "go on", first_id=1)
    await api.services.chat_turns.ends.record_owner_gone(ended)

    relayed = [frame for _, frame in await _relayed(redis, turn_id)]
    assert len(relayed) == 1 + len(pieces), relayed
    assert "hunter2" not in _deltas(relayed), relayed
    assert "hunter2" not in _kept(api)
    assert _pending(api) == []
