"""Turn frames across instances: with Redis, every frame a turn emits is also appended to a
Redis stream of that turn, so `GET .../chat/stream` with `Last-Event-ID` resumes on any
instance behind the load balancer, not only on the one running the turn.

Keys (all expire about `linger` seconds after the turn's last frame: the two lookups are
renewed by its frames once a quarter of that has passed, so they may lapse up to a quarter
sooner: `_renewals_due`):
- `steelframe:chat:frames:{turn_id}`: the stream; one entry per frame, field `f` = JSON.
- `steelframe:chat:latest:{operator_id}`: {turn_id, session_id} of the operator's latest turn.
- `steelframe:chat:turn:{turn_id}:operator`: whose turn it is (a turn id names one operator).

Publishing never fails a turn: a Redis outage is logged once (and its end once), and the
turn goes on, resumable on its own instance as before. The frames it publishes meanwhile are
held in this process, in order (a bounded number: references to frames the turns hold anyway),
and written before any later one once Redis answers again, so a client re-attaching through
another instance gets the whole turn. Frames Redis never got or lost (held past the bound, a
Redis that came back without its data, a stream trimmed at MAX_FRAMES) are said, not skipped:
the reader puts a `status` frame with reason `frames_lost` where they were (`Continuity`).
A turn whose instance was killed mid-turn (SIGKILL, OOM, a crash) ends for its readers once
its slot lapses (bot/chat/coordination.py): the first reader to see it gone, past a grace for a
terminal frame on its way, appends its end to the stream, once (`RedisFrameRelay._owner_gone`),
and that reader alone records the turn in its session (`on_owner_gone`: bot/chat/cut_notes.py).
Finding another instance's turn while Redis is unreachable is a 503 naming the setting, never
a 500. The instance that wrote a turn's frames may run another release (a rolling deploy):
a frame whose `reason` this release has no word for is read without it
(`NumberedFrame.stored`), the one place stored frames are decoded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, Protocol

import msgspec
from redis.exceptions import NoScriptError, RedisError

from bot.chat.coordination import HELD_BY_LUA, SLOT_TTL_SECONDS, slot_held_by, slot_key
from bot.chat.relay_rewrites import first_frames, rewrite_stream
from bot.contracts.chat import (
    DoneFrame,
    ErrorFrame,
    ErrorReason,
    Frame,
    StatusFrame,
    StatusReason,
    decode_frame,
    encode_frame,
)
from bot.contracts.errors import ErrorDetail
from bot.errors import Unavailable
from bot.redis_clients import (
    DEFAULT_LONGEST_BLOCK,
    CancellableRedis,
    blocking_reader,
    xread_entries,
)

log = logging.getLogger(__name__)
PREFIX = "steelframe:chat:"
MAX_FRAMES = 50_000  # a turn longer than this keeps its newest frames (XADD MAXLEN ~)
MAX_BATCH = 500  # frames written in one pipeline at most
# Past this many turns known to have renewed their lookups, the relay forgets those whose
# lookups lapsed (turns whose end was never relayed).
FORGET_PAST = 10_000
# A frame's turn waits for its write at most this long: a Redis that stopped answering (a
# frozen server, a lost network) costs the turns a pause, never their end. (redis-py 8's
# default is the same; said here so it does not hang on a library's default.)
WRITE_TIMEOUT = 5.0
# While Redis is away, frames wait for it in this process, this many at most (the oldest go
# first: a client is likelier to wait on a recent turn). Each is a frame its turn's handle
# keeps anyway while the turn runs and lingers (bot/chat/inflight.py), so holding one costs a
# reference; past the linger, the frame itself (a few hundred bytes).
DEFAULT_MAX_HELD = 100_000
# Redis is asked again after this pause, doubling up to the next (a refused connection costs
# nothing; a frozen Redis costs WRITE_TIMEOUT a try): a re-attach through another instance
# finds a turn whose first frames were held within a couple of seconds of Redis's return.
RETRY_MIN = 0.1
RETRY_MAX = 2.0
LOST_TEXT = (
    "part of this turn was not relayed (Redis was away or lost it); "
    "the whole reply comes with the turn's end"
)
# A turn whose owner is gone (its instance was killed: SIGKILL, OOM, a crash) ends for its
# readers with an `error` frame (reason `cancelled`) saying so, in the words of a turn the
# service cut while stopping (bot/chat/inflight.py SERVICE_STOPPED_TEXT).
OWNER_GONE_TEXT = (
    "the service stopped (the instance running this turn went away) before this turn finished"
)
# A turn releases its slot just before it relays its terminal frame, whose write may wait
# for the batch ahead of it and then for its own, each up to WRITE_TIMEOUT: a reader that
# finds the slot gone waits this long (the turn's slot TTL at most) for that frame before
# it says the turn's owner is gone.
OWNER_GONE_GRACE = 2 * WRITE_TIMEOUT
# The reader that ended such a turn records it in the turn's session within this (a
# database that does not answer costs the record, logged, never the reader's end frame).
OWNER_GONE_RECORD_SECONDS = 5.0
TERMINAL_FRAMES = (DoneFrame, ErrorFrame)
LOOKUP_FRAMES = (StatusFrame, *TERMINAL_FRAMES)  # frames that write the lookups afresh
# A batch's frames in one command: XADD and PEXPIRE per frame, in the order given (a turn's
# frames in a batch stay in order), then a PEXPIRE of the lookups of the batch's turns due a
# renewal (`_renewals_due`), so the lookups live as long as the stream whatever frames a
# turn sends (a long answer is deltas only: its lookups, written by `turn started`, lapsed
# under it and a re-attach elsewhere found nothing). As two pipelined commands a frame,
# building and parsing them cost the loop ~3x the CPU (bench/frame_relay.py: 32 against
# 10 us a frame).
# KEYS: the N frames' streams, then the lookups; ARGV: linger, MAXLEN, N, the N frames.
_APPEND = """
local linger, maxlen, frames = ARGV[1], ARGV[2], tonumber(ARGV[3])
for i = 1, frames do
  redis.call('XADD', KEYS[i], 'MAXLEN', '~', maxlen, '*', 'f', ARGV[i + 3])
  redis.call('PEXPIRE', KEYS[i], linger)
end
for i = frames + 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], linger)
end
return frames
"""

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


@dataclass(frozen=True, slots=True)
class NumberedFrame:
    """A frame as its turn's stream carries it: numbered, and encoded once (the SSE writer
    and the relay send these bytes to every reader)."""

    id: int
    frame: Frame
    data: bytes

    @classmethod
    def of(cls, frame_id: int, frame: Frame) -> NumberedFrame:
        return cls(frame_id, frame, encode_frame(frame_id, frame))

    @classmethod
    def decode(cls, data: bytes) -> NumberedFrame:
        frame_id, frame = decode_frame(data)
        return cls(frame_id, frame, data)

    @classmethod
    def stored(cls, data: bytes) -> NumberedFrame:
        """A frame as the relay kept it, which another release may have written (a rolling
        deploy replays a turn of an older instance on a newer one, and the reverse). A
        `reason` this release has no word for (an older release's status reason was an
        error's text; a newer one may add a word) is read without it, never guessed: a
        status frame keeps those words as its `detail` (where this release says why), an
        error frame keeps its `error`. The frame is encoded again, so a reader gets only
        the words of this release's contract. What this release writes is checked as
        strictly as before (`decode`); anything else unreadable is raised, as it was."""
        try:
            return cls.decode(data)
        except msgspec.ValidationError as exc:
            refused = exc
        kept = msgspec.json.decode(data)
        reason = kept.pop("reason", None) if isinstance(kept, dict) else None
        if not isinstance(reason, str):
            raise refused
        if kept.get("type") == "status":
            kept.setdefault("detail", reason)
        try:
            frame_id, frame = decode_frame(msgspec.json.encode(kept))
        except msgspec.ValidationError:
            raise refused from None
        log.info("chat: frame %s read without its reason %r (%s)", frame_id, reason, refused)
        return cls.of(frame_id, frame)

    @property
    def terminal(self) -> bool:
        return isinstance(self.frame, TERMINAL_FRAMES)


@dataclass(frozen=True)
class _Outgoing:
    operator_id: int
    turn_id: str
    session_id: str
    frame: NumberedFrame
    written: asyncio.Future[None] | None  # None: its turn did not wait (Redis was away)


class Continuity:
    """A turn's relayed frames in the order its stream holds them, for a reader that saw up
    to `after`: a frame seen already (a batch written again after its answer was lost) is
    skipped, and frames missing before one the reader has not seen (the stream does not start
    with the turn's first frame, or ids jump) are said by a `frames_lost` status frame in
    their place, with the last missing id (which nothing else will ever carry: a turn's frames
    reach its stream in order, so missing ones never come later)."""

    def __init__(self, after: int) -> None:
        self.last = after  # the last id the reader has (been told about)
        self._next: int | None = None  # the id the next entry should have

    def take(self, frame: NumberedFrame) -> list[NumberedFrame]:
        if self._next is None:  # the stream's first entry: the turn's first frame?
            missing = not _opens_turn(frame.frame)
        else:
            missing = frame.id > self._next
        shown: list[NumberedFrame] = []
        if missing and frame.id - 1 > self.last:
            shown.append(lost_frame(frame.id - 1))
        if frame.id > self.last:
            shown.append(frame)
        self.last = max(self.last, frame.id)
        self._next = max(self._next or 0, frame.id + 1)
        return shown


def lost_frame(frame_id: int) -> NumberedFrame:
    """What a reader is told where frames of the turn are missing."""
    return NumberedFrame.of(frame_id, StatusFrame(text=LOST_TEXT, reason=StatusReason.FRAMES_LOST))


def _settle(batch: list[_Outgoing], failure: BaseException | None) -> None:
    """Let the batch's waiting turns go on, whatever happened to the write: none may wait
    for good on a flusher that is gone."""
    for item in batch:
        if item.written is None or item.written.done():  # not waiting, or cancelled meanwhile
            continue
        if failure is None:
            item.written.set_result(None)
        elif isinstance(failure, asyncio.CancelledError):  # shutting down
            item.written.cancel()
        else:
            item.written.set_exception(failure)


def _lookup_keys(operator_id: int, turn_id: str) -> tuple[str, str]:
    """Where a reader finds a turn: the operator's latest turn, and the turn's operator."""
    return f"{PREFIX}latest:{operator_id}", f"{PREFIX}turn:{turn_id}:operator"


def _opens_turn(frame: Frame) -> bool:
    """`turn started`, the first frame of every turn, is the one that names the turn."""
    return isinstance(frame, StatusFrame) and frame.turn_id is not None


@dataclass(frozen=True)
class RelayedTurn:
    turn_id: str
    session_id: str


@dataclass(frozen=True)
class OrphanedTurn:
    """A turn whose owner is gone, ended by a reader (`RedisFrameRelay._owner_gone`): what
    its first frame (`turn started`) said, for its session's note that it did not complete
    (the turn's own record of it died with its instance)."""

    operator_id: int
    turn_id: str
    session_id: str
    message: str
    first_id: int = 1  # its first frame's id: a send again with its key reads it numbered so


# A turn's frames given back changed (the same object: that frame is left as it is).
FramesChange = Callable[[list[NumberedFrame]], list[NumberedFrame]]
# Records an orphaned turn in its session; run by the one reader that ended it.
OwnerGoneRecord = Callable[[OrphanedTurn], Coroutine[Any, Any, None]]


class FrameRelay(Protocol):
    # Set by the composition (bot.chat.pipeline): None records nothing.
    on_owner_gone: OwnerGoneRecord | None

    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: NumberedFrame
    ) -> None: ...

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None: ...

    def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[NumberedFrame | None]: ...

    async def relayed_turns(self) -> list[RelayedTurn]: ...

    async def rewrite(self, turn_id: str, change: FramesChange) -> bool: ...

    def held_turns(self) -> list[RelayedTurn]: ...

    async def rewrite_held(self, turn_id: str, change: FramesChange) -> bool: ...

    async def close(self) -> None: ...


class RedisFrameRelay:
    def __init__(
        self,
        url: str,
        *,
        linger: float,
        longest_block: float = DEFAULT_LONGEST_BLOCK,
        max_held: int = DEFAULT_MAX_HELD,
        slot_ttl: float = SLOT_TTL_SECONDS,
    ) -> None:
        self._redis = blocking_reader(url, longest_block=longest_block)  # locate, replay
        # A deployment that frees a dead instance's slots sooner (a shorter TTL) hears of
        # its turns' end sooner too.
        self._owner_grace = min(OWNER_GONE_GRACE, slot_ttl)
        self._end_orphaned = self._redis.register_script(_END_ORPHANED)
        # Publishing has a client of its own, which writes one batch at a time: a pipeline
        # per frame took a connection per frame, and with 1,000 turns streaming the pool's
        # 100 ran out (MaxConnectionsError: frames missing from the relay). Resumed streams
        # blocked in XREAD hold the other client's connections.
        self._writer = CancellableRedis.from_url(
            url, socket_timeout=WRITE_TIMEOUT, socket_connect_timeout=WRITE_TIMEOUT
        )
        self._linger_ms = int(linger * 1000)
        self._down = False  # publishing failed since the last success (logged once)
        # Frames not written yet, in the order published: the batch being written is the
        # first `_writing` of them (they leave once written), the rest wait for it.
        self._outbox: deque[_Outgoing] = deque()
        self._writing = 0
        self._max_held = max_held
        self._dropped: set[str] = set()  # turns whose held frames went, this outage
        # Held by a batch's write and by a change of the frames waiting (`rewrite_held`):
        # a frame is changed before its write or after it, never while it is on its way.
        self._write_lock = asyncio.Lock()
        self._closing = asyncio.Event()
        self._append_sha = self._writer.register_script(_APPEND).sha
        self._flusher: asyncio.Task[None] | None = None
        self.on_owner_gone: OwnerGoneRecord | None = None
        # When each running turn's lookups were last written or renewed (loop time).
        self._lookups_at: dict[str, float] = {}
        self._renew_every = linger / 4
        self._forget_past = FORGET_PAST
        # Records of orphaned turns under way: each outlives the reader that started it (a
        # client that leaves must not cut its write), and the relay's close waits for them.
        self._recording: set[asyncio.Task[None]] = set()

    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: NumberedFrame
    ) -> None:
        """Relay the frame with the others published meanwhile (one script call for all);
        returns once it is written, or once Redis failed it (logged, never raised). While
        Redis is away it returns at once: the frame waits in line (DEFAULT_MAX_HELD) and is
        written, in order, once Redis answers again. Any other failure of the batch (a frame
        that is not JSON) is raised to its turns."""
        if self._down:  # a turn never waits for a Redis that is away
            self._outbox.append(_Outgoing(operator_id, turn_id, session_id, frame, None))
            self._drop_oldest()
            self._start_flusher()
            return
        written = asyncio.get_running_loop().create_future()
        self._outbox.append(_Outgoing(operator_id, turn_id, session_id, frame, written))
        self._start_flusher()
        await written

    @property
    def held(self) -> int:
        """Frames published and not written yet (while Redis is away, those waiting for it)."""
        return len(self._outbox)

    def _start_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="frame-relay")

    async def _flush(self) -> None:
        """Write the outbox from its head, a batch at a time; a batch Redis fails stays at
        the head (its turns go on) and is tried again after a pause that doubles, so no
        frame overtakes an earlier one of its turn."""
        pause = RETRY_MIN
        while self._outbox:
            async with self._write_lock:
                batch = list(itertools.islice(self._outbox, MAX_BATCH))
                self._writing = len(batch)
                try:
                    written = await self._write(batch)
                except BaseException as exc:  # not Redis's (those are logged): its turns see it
                    self._taken(batch, exc)
                    raise
                finally:
                    self._writing = 0
                if written:
                    self._taken(batch, None)
            if written:
                pause = RETRY_MIN
                continue
            _settle(batch, None)  # their turns go on; the frames keep their place
            if self._closing.is_set():  # held frames go with the process
                self._taken(list(self._outbox), None)
                return
            self._drop_oldest()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._closing.wait()  # one last try, then
            pause = min(pause * 2, RETRY_MAX)

    def _taken(self, batch: list[_Outgoing], failure: BaseException | None) -> None:
        for _ in batch:
            self._outbox.popleft()
        _settle(batch, failure)

    def _drop_oldest(self) -> None:
        """Past `max_held`, the oldest held frames go (never the batch being written); their
        turns' readers are told part of the turn is missing (`Continuity`)."""
        if self._writing or len(self._outbox) <= self._max_held:
            return
        gone = [self._outbox.popleft() for _ in range(len(self._outbox) - self._max_held)]
        _settle(gone, None)
        turns = {item.turn_id for item in gone} - self._dropped
        if turns and not self._dropped:
            log.warning(
                "more than %d frames wait for Redis: the oldest are dropped (turn %s first); "
                "a client re-attaching to those turns through another instance is told part "
                "of the turn is missing",
                self._max_held,
                gone[0].turn_id,
            )
        self._dropped |= turns

    async def _write(self, batch: list[_Outgoing]) -> bool:
        """Write the batch: True once written, False (logged once an outage) when Redis
        failed it."""
        streams = [f"{PREFIX}frames:{item.turn_id}" for item in batch]
        texts = [item.frame.data for item in batch]
        try:
            try:
                await self._append(batch, streams, texts)
            except NoScriptError:  # a restarted or flushed Redis: load it, once
                await self._writer.script_load(_APPEND)
                await self._append(batch, streams, texts)
        except RedisError as exc:
            if not self._down:
                self._down = True
                log.warning(
                    "turn %s: frames not relayed through Redis until it is back (%s); they "
                    "wait here, in order, and turns resume only on the instance running them "
                    "meanwhile",
                    batch[0].turn_id,
                    type(exc).__name__,
                )
            return False
        if self._down:
            self._down = False
            self._dropped = set()
            log.warning(
                "frames are relayed through Redis again; the %d that waited for it go first",
                len(self._outbox),
            )
        return True

    async def _append(self, batch: list[_Outgoing], streams: list[str], texts: list[bytes]) -> None:
        """One round trip: the frames and the renewal of their turns' lookups (`_APPEND`),
        and the lookups written afresh by the frames that write them (one or two a turn and
        round: they say the turn and session whatever frame comes first or last). Repeating
        it after a NOSCRIPT is harmless: the script wrote nothing, and the lookups are plain
        SETs."""
        now = asyncio.get_running_loop().time()
        due = self._renewals_due(batch, now)
        lookups = [key for item in due for key in _lookup_keys(item.operator_id, item.turn_id)]
        keys_and_args: list[str | int | bytes] = [
            *streams,
            *lookups,
            self._linger_ms,
            MAX_FRAMES,
            len(streams),
            *texts,
        ]
        keys = len(streams) + len(lookups)
        renewing = [item for item in batch if isinstance(item.frame.frame, LOOKUP_FRAMES)]
        if not renewing:  # most batches: one command, no pipeline to build
            await self._writer.evalsha(self._append_sha, keys, *keys_and_args)
        else:
            async with self._writer.pipeline(transaction=False) as pipe:
                pipe.evalsha(self._append_sha, keys, *keys_and_args)
                for item in renewing:
                    self._lookups(pipe, item)
                await pipe.execute()
        self._renewed([*due, *renewing], now)  # an end last: its turn is forgotten

    def _renewals_due(self, batch: list[_Outgoing], now: float) -> list[_Outgoing]:
        """One frame of each turn whose lookups this batch should renew: those last
        written or renewed a quarter of their lifetime ago or more (renewing them with
        every frame cost a third more CPU a frame with 1,000 turns streaming: bench/
        frame_relay.py)."""
        due: dict[str, _Outgoing] = {}
        for item in batch:
            if isinstance(item.frame.frame, LOOKUP_FRAMES):  # it writes them afresh
                continue
            last = self._lookups_at.get(item.turn_id)
            if last is None or now - last >= self._renew_every:
                due.setdefault(item.turn_id, item)
        return list(due.values())

    def _renewed(self, renewing: list[_Outgoing], now: float) -> None:
        """The batch is written: the lookups of these frames' turns were written or renewed
        now; an ended turn's are forgotten here (a turn whose end never came, once they
        lapsed)."""
        for item in renewing:
            if item.frame.terminal:
                self._lookups_at.pop(item.turn_id, None)
            else:
                self._lookups_at[item.turn_id] = now
        if len(self._lookups_at) > self._forget_past:
            cutoff = now - self._linger_ms / 1000
            self._lookups_at = {t: at for t, at in self._lookups_at.items() if at > cutoff}
            self._forget_past = max(FORGET_PAST, 2 * len(self._lookups_at))

    def _lookups(self, pipe: Any, item: _Outgoing) -> None:
        latest_key, owner_key = _lookup_keys(item.operator_id, item.turn_id)
        latest = json.dumps({"turn_id": item.turn_id, "session_id": item.session_id})
        pipe.set(latest_key, latest, px=self._linger_ms)
        pipe.set(owner_key, item.operator_id, px=self._linger_ms)

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

    async def relayed_turns(self) -> list[RelayedTurn]:
        """Every turn Redis holds frames of, with the session its first frame names (the
        turns of a stream whose first frame went are not listed)."""
        found = await first_frames(self._writer, f"{PREFIX}frames:")
        turns = [(turn_id, NumberedFrame.stored(data).frame) for turn_id, data in found]
        return [
            RelayedTurn(turn_id, frame.session)
            for turn_id, frame in turns
            if isinstance(frame, StatusFrame) and frame.session is not None
        ]

    async def rewrite(self, turn_id: str, change: FramesChange) -> bool:
        """The turn's relayed frames written again as `change` gives them back, each under
        its stream id (bot.chat.relay_rewrites). Whether any changed."""

        def changed(stored: list[bytes]) -> list[bytes | None]:
            before = [NumberedFrame.stored(data) for data in stored]
            after = change(before)
            return [None if a is b else a.data for a, b in zip(after, before, strict=True)]

        return await rewrite_stream(self._writer, f"{PREFIX}frames:{turn_id}", changed)

    def held_turns(self) -> list[RelayedTurn]:
        """The turns with frames waiting in this process to be written (Redis away)."""
        found = {item.turn_id: item.session_id for item in self._outbox}
        return [RelayedTurn(turn_id, session_id) for turn_id, session_id in found.items()]

    async def rewrite_held(self, turn_id: str, change: FramesChange) -> bool:
        """The turn's frames waiting to be written, as `change` gives them back, in their
        place; a batch on its way is waited for first (written, its frames are Redis's, for
        `rewrite`). Whether any changed."""
        async with self._write_lock:
            places = [place for place, item in enumerate(self._outbox) if item.turn_id == turn_id]
            before = [self._outbox[place].frame for place in places]
            changed = False
            for place, old, new in zip(places, before, change(before), strict=True):
                if new is not old:
                    self._outbox[place] = replace(self._outbox[place], frame=new)
                    changed = True
            return changed

    async def close(self) -> None:
        """Write what waits (one more try if Redis is away: then it goes with the process)."""
        self._closing.set()
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        if self._recording:
            await asyncio.wait(self._recording, timeout=OWNER_GONE_RECORD_SECONDS)
        await self._writer.aclose()
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
