"""A chat turn's end is told truthfully wherever it is read: a turn whose instance was killed
is recorded in its session by the one reader that ended it (whoever else races it); its
lookups in Redis live as long as its frames, however long it sends only deltas; and a turn
the service cuts while its session is being written still leaves its note there. Real
Redis; the blocking endpoint through the real service."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from bot.chat import pipeline as pipeline_module
from bot.chat.coordination import RedisTurnLocks
from bot.chat.frame_relay import RedisFrameRelay
from bot.chat.frames import OWNER_GONE_TEXT, NumberedFrame, OrphanedTurn
from bot.chat.inflight import TurnHandle
from bot.chat.open_turn_rows import OpenTurn
from bot.chat.turn import CUT_KIND, CUT_REPLY, OWNER_GONE_REPLY
from bot.chat.turn_keys import Asked, KeyedTurn, claim_key, row_key
from bot.clock import utcnow
from bot.contracts.chat import DeltaFrame, StatusFrame
from bot.models import ChatSession
from operator_api.deps import OPERATOR_API
from tests.conftest import make_settings, read_sse
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply

OPERATOR = 7
MESSAGE = "what does the release checklist say?"
STARTED = NumberedFrame.of(
    101, StatusFrame(text="turn started", session="session-1", turn_id="turn-1", message=MESSAGE)
)
SHORT_TTL = 0.5  # the slot of a turn whose owner is gone lapses this long after it renewed it


async def _ended(relay: RedisFrameRelay) -> list[NumberedFrame]:
    async with asyncio.timeout(PATIENCE_SECONDS):  # not the frames' expiry (ten minutes)
        return [
            frame
            async for frame in relay.replay("turn-1", after=STARTED.id, heartbeat=0.1)
            if frame is not None
        ]


async def test_the_one_reader_that_ends_an_orphaned_turn_records_it(redis_url: str) -> None:
    """Three readers, each through an instance of its own, wait on a turn whose owner was
    killed: each reads the end, and one of them, the one whose script appended it, records
    the turn for its session (with the message its first frame carried)."""
    locks = RedisTurnLocks(redis_url, ttl_seconds=SHORT_TTL)
    owner = RedisFrameRelay(redis_url, linger=600, slot_ttl=SHORT_TTL)
    readers = [RedisFrameRelay(redis_url, linger=600, slot_ttl=SHORT_TTL) for _ in range(3)]
    recorded: list[tuple[int, OrphanedTurn]] = []
    for number, reader in enumerate(readers):

        async def record(turn: OrphanedTurn, number: int = number) -> None:
            recorded.append((number, turn))

        reader.on_owner_gone = record
    try:
        assert await locks.acquire(OPERATOR, "turn-1") is None
        await owner.publish(OPERATOR, "turn-1", "session-1", STARTED)
        # Its owner renews the slot no more (killed).
        ends = await asyncio.gather(*(_ended(reader) for reader in readers))
    finally:
        for relay in (owner, *readers):
            await relay.close()
        await locks.close()
    assert [len(frames) for frames in ends] == [1, 1, 1], ends
    assert len(recorded) == 1, recorded
    [(_, turn)] = recorded
    assert turn == OrphanedTurn(OPERATOR, "turn-1", "session-1", MESSAGE, STARTED.id)


async def test_a_turn_sending_only_deltas_is_found_past_its_lookups_first_lifetime(
    redis_url: str,
) -> None:
    """Only `turn started` (a status frame) writes a turn's lookups; a long answer sends
    deltas after it for longer than the lookups' lifetime (the relay's linger, short here):
    each batch of frames renews them, so a client re-attaching elsewhere, by its session or
    by the turn, still finds the turn."""
    # Lookups renewed at most every quarter linger lapse only if no delta comes for 3/4 of
    # it: a stall of the test's loop that long (2.25 s here) would fail it, not the relay.
    linger = 3.0
    relay = RedisFrameRelay(redis_url, linger=linger)
    try:
        await relay.publish(OPERATOR, "turn-1", "session-1", STARTED)
        started = time.monotonic()
        frame_id = STARTED.id
        # Past the lookups' first lifetime by a renewal period: they must have been renewed.
        while time.monotonic() - started < 1.25 * linger:  # a delta every fifth of a second
            frame_id += 1
            delta = NumberedFrame.of(frame_id, DeltaFrame(text=".", draft=1))
            await relay.publish(OPERATOR, "turn-1", "session-1", delta)
            await asyncio.sleep(0.2)
        by_session = await relay.locate(OPERATOR, session_id="session-1", turn_id=None)
        by_turn = await relay.locate(OPERATOR, session_id=None, turn_id="turn-1")
    finally:
        await relay.close()
    assert by_session is not None and by_session.turn_id == "turn-1"
    assert by_turn is not None and by_turn.session_id == "session-1"


async def test_a_blocking_turn_cut_while_its_session_is_written_leaves_its_note(
    api_factory: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The service stops while the turn's session is being written (a slow database): the
    write lands, and then the session keeps the message and the cut's note, once."""
    writing = threading.Event()
    operators: list[int] = []
    turns: list[TurnHandle] = []  # the turn, once it is known
    open_for_turn = pipeline_module.open_for_turn

    def slow_open(session: Any, operator_id: int, *args: Any, **kwargs: Any) -> Any:
        """The session's write, slow until the service has cut the turn (the write runs on a
        thread of its own: bot.group_commit)."""
        operators.append(operator_id)
        writing.set()
        deadline = time.monotonic() + PATIENCE_SECONDS
        while not (turns and turns[0].cut) and time.monotonic() < deadline:
            time.sleep(0.01)
        return open_for_turn(session, operator_id, *args, **kwargs)

    monkeypatch.setattr(pipeline_module, "open_for_turn", slow_open)
    runtime = ScriptedRuntime([reply("never shown")], gate=asyncio.Event())
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    registry = api.raw.app[OPERATOR_API].registry
    sending = asyncio.create_task(api.post("/api/operator/chat", json={"message": "still there?"}))
    assert await asyncio.to_thread(writing.wait, PATIENCE_SECONDS)
    handle = registry.busy(operators[0])
    assert handle is not None
    turns.append(handle)
    await asyncio.wait_for(registry.shut_down(grace=0.0), PATIENCE_SECONDS)
    answer = await asyncio.wait_for(sending, PATIENCE_SECONDS)
    body = await answer.json()
    assert (answer.status, body["detail"]["reason"]) == (503, "cancelled"), body
    session = await (
        await api.get(f"/api/operator/chat/session/{body['detail']['session']}")
    ).json()
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", "still there?"),
        ("assistant", CUT_REPLY),
    ]
    assert session["messages"][1]["meta"]["kind"] == CUT_KIND
    assert not runtime.called.is_set()  # cut before its model call


async def test_a_turn_is_noted_once_whoever_notes_it(api_factory: Any, tmp_path: Path) -> None:
    """A reader's note of an orphaned turn (`record_owner_gone`) leaves a turn whose answer
    was saved before its instance died as it is, and notes a turn once however often it is
    told (a reader after a cut the turn's own instance noted, before its end was relayed)."""
    runtime = ScriptedRuntime([reply("All clear.")])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    answer = await api.post("/api/operator/chat", json={"message": "anything new?"})
    answered = await answer.json()
    session_id, turn_id = answered["session"], answered["turn_id"]

    def owner(session: Any) -> int:
        return int(session.get(ChatSession, session_id).operator_id)

    operator = api.services.db.call(owner)
    turns = api.services.chat_turns
    await turns.record_owner_gone(OrphanedTurn(operator, turn_id, session_id, "anything new?"))
    for _ in range(2):
        await turns.record_owner_gone(OrphanedTurn(operator, "turn-2", session_id, "and now?"))
    session = await (await api.get(f"/api/operator/chat/session/{session_id}")).json()
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", "anything new?"),
        ("assistant", "All clear."),
        ("user", "and now?"),
        ("assistant", OWNER_GONE_REPLY),
    ]


async def test_an_orphaned_turn_sent_with_a_key_answers_the_key_with_its_note(
    api_factory: Any, tmp_path: Path
) -> None:
    """A turn sent with an idempotency key, whose instance was killed and which a reader
    then ended and noted (`record_owner_gone`): a send again with its key answers the end
    the reader read (reason `cancelled`), as its session's note says, not a 409 "no longer
    running" forever; nothing runs again."""
    runtime = ScriptedRuntime([reply("never asked")])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    session_id = (await (await api.post("/api/operator/chat/new")).json())["id"]
    operator = api.services.db.call(lambda s: int(s.get(ChatSession, session_id).operator_id))
    # The killed instance claimed the key for its turn, kept the turn open (naming its key)
    # as its first frame went out, then died before its end.
    asked = Asked(message=MESSAGE, session=session_id, agent=None, focus=None, keep_focus=True)
    claimed = KeyedTurn(asked, "turn-killed", session_id)
    key = row_key(operator, "the-key")
    assert api.services.db.call(claim_key, key, claimed) is None
    kept = OpenTurn(
        turn_id="turn-killed",
        operator_id=operator,
        session_id=session_id,
        message=MESSAGE,
        started_at=utcnow(),
        key=key,
    )
    api.services.db.call(lambda s: s.add(kept))

    turns = api.services.chat_turns
    await turns.record_owner_gone(
        OrphanedTurn(operator, "turn-killed", session_id, MESSAGE, first_id=STARTED.id)
    )
    again = await api.post(
        "/api/operator/chat/stream",
        json={"message": MESSAGE, "session": session_id},
        headers={"Idempotency-Key": "the-key"},
    )
    assert again.status == 200, await again.text()
    frames = await read_sse(again)
    assert [(f["type"], f["id"]) for f in frames] == [("status", STARTED.id), ("error", 102)]
    assert frames[0]["turn_id"] == "turn-killed" and frames[0]["message"] == MESSAGE
    assert frames[1]["reason"] == "cancelled" and frames[1]["error"] == OWNER_GONE_TEXT
    session = await (await api.get(f"/api/operator/chat/session/{session_id}")).json()
    assert [(m["role"], m["content"]) for m in session["messages"]] == [
        ("user", MESSAGE),
        ("assistant", OWNER_GONE_REPLY),
    ]
    assert not runtime.requests
