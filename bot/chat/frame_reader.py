"""The reading side of the frame relay (bot.chat.frames): a turn found by its operator
(`locate`), its frames read from its stream and then live (`replay`), and the end of a turn
whose owner is gone, appended once by the first reader to see it (`_owner_gone`) and
recorded by that reader alone (`on_owner_gone`)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from bot.chat.coordination import HELD_BY_LUA, SLOT_TTL_SECONDS, slot_held_by, slot_key
from bot.chat.frame_outbox import WRITE_TIMEOUT
from bot.chat.frames import (
    OWNER_GONE_TEXT,
    PREFIX,
    Continuity,
    NumberedFrame,
    OrphanedTurn,
    OwnerGoneRecord,
    RelayedTurn,
)
from bot.contracts.chat import ErrorFrame, ErrorReason, StatusFrame
from bot.contracts.errors import ErrorDetail
from bot.errors import Unavailable
from bot.redis_clients import DEFAULT_LONGEST_BLOCK, blocking_reader, xread_entries

log = logging.getLogger(__name__)
# A turn releases its slot just before it relays its terminal frame, whose write may wait
# for the batch ahead of it and then for its own, each up to WRITE_TIMEOUT: a reader that
# finds the slot gone waits this long (the turn's slot TTL at most) for that frame before
# it says the turn's owner is gone.
OWNER_GONE_GRACE = 2 * WRITE_TIMEOUT
# The reader that ended such a turn records it in the turn's session within this (a
# database that does not answer costs the record, logged, never the reader's end frame).
OWNER_GONE_RECORD_SECONDS = 5.0

# The end of a turn whose owner is gone, appended once for every reader: only while the
# slot (KEYS[2]) is not held by the turn (ARGV[1]) and the stream's last entry is still the
# one the reader saw last (ARGV[2], not a terminal frame: it would have ended the reader).
# A turn's real terminal frame, or another reader's end, coming first leaves it undone.
# KEYS[3] is the turn's operator lookup, kept as long as the stream (as a terminal frame's
# relay does).
_END_ORPHANED = (
    HELD_BY_LUA
    + """
if held_by(KEYS[2], ARGV[1]) then return 0 end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 or last[1][1] ~= ARGV[2] then return 0 end
redis.call('XADD', KEYS[1], '*', 'f', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return 1
"""
)


class FrameReader:
    """Finds and reads relayed turns, on a client whose reads may block (XREAD)."""

    def __init__(
        self,
        url: str,
        *,
        linger: float,
        longest_block: float = DEFAULT_LONGEST_BLOCK,
        slot_ttl: float = SLOT_TTL_SECONDS,
    ) -> None:
        self._redis = blocking_reader(url, longest_block=longest_block)  # locate, replay
        # A deployment that frees a dead instance's slots sooner (a shorter TTL) hears of
        # its turns' end sooner too.
        self._owner_grace = min(OWNER_GONE_GRACE, slot_ttl)
        self._end_orphaned = self._redis.register_script(_END_ORPHANED)
        self._linger_ms = int(linger * 1000)
        self.on_owner_gone: OwnerGoneRecord | None = None
        # Records of orphaned turns under way: each outlives the reader that started it (a
        # client that leaves must not cut its write), and the relay's close waits for them.
        self._recording: set[asyncio.Task[None]] = set()

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None:
        """The operator's turn by id, or their latest one (in `session_id` if given)."""
        try:
            return await self._locate(operator_id, session_id=session_id, turn_id=turn_id)
        except RedisError as exc:
            raise Unavailable(
                "turns running on other instances cannot be found while Redis is "
                "unreachable; check STEELFRAME_REDIS_URL",
                detail=ErrorDetail(reason=type(exc).__name__),
            ) from exc

    async def _locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None:
        if turn_id is not None:
            owner = await self._redis.get(f"{PREFIX}turn:{turn_id}:operator")
            if owner is None or int(owner) != operator_id:
                return None
            raw = await self._redis.get(f"{PREFIX}latest:{operator_id}")
            latest = json.loads(raw) if raw else {}
            return RelayedTurn(turn_id, str(latest.get("session_id") or session_id or ""))
        raw = await self._redis.get(f"{PREFIX}latest:{operator_id}")
        if raw is None:
            return None
        latest = json.loads(raw)
        if session_id is not None and latest["session_id"] != session_id:
            return None
        return RelayedTurn(str(latest["turn_id"]), str(latest["session_id"]))

    async def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[NumberedFrame | None]:
        """Frames with id > `after`, then live ones until the terminal frame; None after
        `heartbeat` seconds without one. A turn whose owner is gone (its slot expired or
        taken by another turn, no terminal frame within OWNER_GONE_GRACE) ends with an
        `error` frame, reason `cancelled` (`_owner_gone`). Ends if the stream expires
        unfinished. Redis failing meanwhile raises `Unavailable`: the SSE writer ends the
        stream without a terminal frame, which the clients re-attach from their
        Last-Event-ID (the turn goes on where it runs)."""
        stream = f"{PREFIX}frames:{turn_id}"
        position: bytes | str = "0-0"
        order = Continuity(after)
        heartbeat_ms = int((heartbeat or DEFAULT_LONGEST_BLOCK) * 1000)
        watch = _OwnerWatch(turn_id, stream)
        while True:
            block = watch.block(heartbeat_ms, self._owner_grace)
            try:
                answer: Any = await self._redis.xread({stream: position}, block=block, count=500)
                entries = xread_entries(answer)  # (entry id, {b"f": frame JSON})
                if not entries and not await self._redis.exists(stream):
                    return
                if not entries and await self._owner_gone(watch, position):
                    continue  # its end is in the stream now: read it as every reader does
            except RedisError as exc:
                raise Unavailable(
                    "the turn's frames cannot be read while Redis is unreachable; check "
                    "STEELFRAME_REDIS_URL",
                    detail=ErrorDetail(reason=type(exc).__name__),
                ) from exc
            if not entries:
                yield None
                continue
            for entry_id, fields in entries:
                position = entry_id
                frame = NumberedFrame.stored(fields[b"f"])
                watch.last_id = frame.id
                for shown in order.take(frame):
                    yield shown
                if frame.terminal:  # nothing of the turn follows (a repeat at most)
                    return

    async def _owner_gone(self, watch: _OwnerWatch, position: bytes | str) -> bool:
        """Nothing came: is the turn's owner still there? A look at its slot (two GETs at
        most, once a heartbeat). Not held by the turn: it released the slot to end (its
        terminal frame is on its way) or it is gone; after the grace, a second look and the
        end, in one script (`_END_ORPHANED`), which the real terminal frame or another
        reader's end, arrived meanwhile, leaves undone. True once the end is appended."""
        if watch.operator is None:
            raw = await self._redis.get(f"{PREFIX}turn:{watch.turn_id}:operator")
            if raw is None:  # not known (an expired lookup): the stream's expiry ends it
                return False
            watch.operator = int(raw)
        slot = slot_key(watch.operator)
        if slot_held_by(await self._redis.get(slot), watch.turn_id):
            watch.gone_since = None
            return False
        now = asyncio.get_running_loop().time()
        if watch.gone_since is None:
            watch.gone_since = now
        if now - watch.gone_since < self._owner_grace:
            return False
        end = NumberedFrame.of(
            watch.last_id + 1, ErrorFrame(error=OWNER_GONE_TEXT, reason=ErrorReason.CANCELLED)
        )
        operator_key = f"{PREFIX}turn:{watch.turn_id}:operator"
        ended = await self._end_orphaned(
            keys=[watch.stream, slot, operator_key],
            args=[watch.turn_id, position, end.data, self._linger_ms],
        )
        if ended:
            log.warning(
                "turn %s: its owner is gone (its slot lapsed unfinished); ended for its readers",
                watch.turn_id,
            )
            # This reader's script appended the end, so this reader alone records it: before
            # the end is read, so a client that reloads the session on it finds the note.
            await self._record_orphaned(watch)
        watch.gone_since = None  # held again, or ended: look afresh
        return bool(ended)

    async def _record_orphaned(self, watch: _OwnerWatch) -> None:
        """Let the orphaned turn's session say it did not complete (`on_owner_gone`), with
        the message its first frame carries; bounded, logged, never raised (the end is in
        the stream already)."""
        record = self.on_owner_gone
        if record is None or watch.operator is None:
            return
        try:
            first: Any = await self._redis.xrange(watch.stream, count=1)
            numbered = NumberedFrame.stored(first[0][1][b"f"]) if first else None
        except Exception as exc:  # Redis failing, or a frame unreadable
            log.warning("turn %s: its first frame not read (%r); no note", watch.turn_id, exc)
            return
        opened = numbered.frame if numbered is not None else None
        if (
            numbered is None
            or not isinstance(opened, StatusFrame)
            or opened.turn_id != watch.turn_id
            or not opened.session
            or opened.message is None
        ):  # trimmed (MAXLEN) or lost: the message is not known here
            log.warning("turn %s: its first frame is gone; no note in its session", watch.turn_id)
            return
        orphaned = OrphanedTurn(
            watch.operator, watch.turn_id, opened.session, opened.message, numbered.id
        )
        task = asyncio.create_task(record(orphaned), name=f"orphaned-{watch.turn_id}")
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)
        try:
            async with asyncio.timeout(OWNER_GONE_RECORD_SECONDS):
                await asyncio.shield(task)
        except Exception as exc:  # TimeoutError included
            log.warning("turn %s: its end was not recorded in its session (%r)", watch.turn_id, exc)

    async def close(self) -> None:
        """Let the records of orphaned turns under way finish (bounded), then disconnect."""
        if self._recording:
            await asyncio.wait(self._recording, timeout=OWNER_GONE_RECORD_SECONDS)
        await self._redis.aclose()


@dataclass
class _OwnerWatch:
    """What a reader knows of the owner of the turn it waits on."""

    turn_id: str
    stream: str
    operator: int | None = None  # whose slot the turn holds (read once)
    last_id: int = 0  # the id of the stream's last frame read
    gone_since: float | None = None  # when the slot was first seen not held by the turn

    def block(self, heartbeat_ms: int, grace: float) -> int:
        """How long the next read may wait: a heartbeat, or the rest of the grace."""
        if self.gone_since is None:
            return heartbeat_ms
        left = self.gone_since + grace - asyncio.get_running_loop().time()
        return max(1, min(heartbeat_ms, int(left * 1000) + 1))
