"""Turn frames across instances: with Redis, every frame a turn emits is also appended to a
Redis stream of that turn, so `GET .../chat/stream` with `Last-Event-ID` resumes on any
instance behind the load balancer, not only on the one running the turn.

Keys (all expire `linger` seconds after the turn's last frame):
- `steelframe:chat:frames:{turn_id}`: the stream; one entry per frame, field `f` = JSON.
- `steelframe:chat:latest:{operator_id}`: {turn_id, session_id} of the operator's latest turn.
- `steelframe:chat:turn:{turn_id}:operator`: whose turn it is (a turn id names one operator).

Publishing never fails a turn: a Redis outage is logged once (and its end once), and the
turn goes on, resumable on its own instance as before. Finding another instance's turn while
Redis is unreachable is a 503 naming the setting, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, RedisError

from bot.contracts.chat import (
    DoneFrame,
    ErrorFrame,
    Frame,
    StatusFrame,
    decode_frame,
    encode_frame,
)
from bot.errors import Unavailable
from bot.redis_clients import DEFAULT_LONGEST_BLOCK, blocking_reader, xread_entries

log = logging.getLogger(__name__)
PREFIX = "steelframe:chat:"
MAX_FRAMES = 50_000  # a turn longer than this keeps its newest frames (XADD MAXLEN ~)
MAX_BATCH = 500  # frames written in one pipeline at most
# A frame's turn waits for its write at most this long: a Redis that stopped answering (a
# frozen server, a lost network) costs the turns a pause, never their end. (redis-py 8's
# default is the same; said here so it does not hang on a library's default.)
WRITE_TIMEOUT = 5.0
TERMINAL_FRAMES = (DoneFrame, ErrorFrame)
LOOKUP_FRAMES = (StatusFrame, *TERMINAL_FRAMES)  # frames that renew the lookups
# A batch's frames in one command: XADD and PEXPIRE per frame, in the order given (a turn's
# frames in a batch stay in order). As two pipelined commands a frame, building and parsing
# them cost the loop ~3x the CPU (bench/frame_relay.py: 32 against 10 us a frame).
_APPEND = """
local linger, maxlen = ARGV[1], ARGV[2]
for i, stream in ipairs(KEYS) do
  redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'f', ARGV[i + 2])
  redis.call('PEXPIRE', stream, linger)
end
return #KEYS
"""


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

    @property
    def terminal(self) -> bool:
        return isinstance(self.frame, TERMINAL_FRAMES)


@dataclass(frozen=True)
class _Outgoing:
    operator_id: int
    turn_id: str
    session_id: str
    frame: NumberedFrame
    written: asyncio.Future[None]


@dataclass(frozen=True)
class RelayedTurn:
    turn_id: str
    session_id: str


class FrameRelay(Protocol):
    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: NumberedFrame
    ) -> None: ...

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None: ...

    def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[NumberedFrame | None]: ...

    async def close(self) -> None: ...


class RedisFrameRelay:
    def __init__(
        self, url: str, *, linger: float, longest_block: float = DEFAULT_LONGEST_BLOCK
    ) -> None:
        self._redis = blocking_reader(url, longest_block=longest_block)  # locate, replay
        # Publishing has a client of its own, which writes one batch at a time: a pipeline
        # per frame took a connection per frame, and with 1,000 turns streaming the pool's
        # 100 ran out (MaxConnectionsError: frames missing from the relay). Resumed streams
        # blocked in XREAD hold the other client's connections.
        self._writer = aioredis.Redis.from_url(
            url, socket_timeout=WRITE_TIMEOUT, socket_connect_timeout=WRITE_TIMEOUT
        )
        self._linger_ms = int(linger * 1000)
        self._down = False  # publishing failed since the last success (logged once)
        self._outbox: list[_Outgoing] = []
        self._append_sha = self._writer.register_script(_APPEND).sha
        self._flusher: asyncio.Task[None] | None = None

    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: NumberedFrame
    ) -> None:
        """Relay the frame with the others published meanwhile (one pipeline for all);
        returns once it is written, or once Redis failed it (logged, never raised). Any
        other failure of the batch (a frame that is not JSON) is raised to its turns."""
        written = asyncio.get_running_loop().create_future()
        self._outbox.append(_Outgoing(operator_id, turn_id, session_id, frame, written))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="frame-relay")
        await written

    async def _flush(self) -> None:
        while self._outbox:
            batch, self._outbox = self._outbox[:MAX_BATCH], self._outbox[MAX_BATCH:]
            failure: BaseException | None = None
            try:
                await self._write(batch)
            except BaseException as exc:  # not Redis's (those are logged): its turns see it
                failure = exc
                raise
            finally:
                # Every turn in the batch goes on, whatever happened to the write: none
                # may wait for good on a flusher that is gone.
                for item in batch:
                    if item.written.done():  # its turn was cancelled meanwhile
                        continue
                    if failure is None:
                        item.written.set_result(None)
                    elif isinstance(failure, asyncio.CancelledError):  # shutting down
                        item.written.cancel()
                    else:
                        item.written.set_exception(failure)

    async def _write(self, batch: list[_Outgoing]) -> None:
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
                    "turn %s: frames not relayed through Redis until it is back (%s); turns "
                    "resume only on the instance running them",
                    batch[0].turn_id,
                    type(exc).__name__,
                )
            return
        if self._down:
            self._down = False
            log.warning("frames are relayed through Redis again")

    async def _append(self, batch: list[_Outgoing], streams: list[str], texts: list[bytes]) -> None:
        """One round trip: the frames (`_APPEND`) and the lookups of the frames that renew
        them (one or two a turn and round: they live as long as the stream, whatever frame
        comes first or last). Repeating it after a NOSCRIPT is harmless: the script wrote
        nothing, and the lookups are plain SETs."""
        keys_and_args: list[str | int | bytes] = [*streams, self._linger_ms, MAX_FRAMES, *texts]
        renewing = [item for item in batch if isinstance(item.frame.frame, LOOKUP_FRAMES)]
        if not renewing:  # most batches: one command, no pipeline to build
            await self._writer.evalsha(self._append_sha, len(streams), *keys_and_args)
            return
        async with self._writer.pipeline(transaction=False) as pipe:
            pipe.evalsha(self._append_sha, len(streams), *keys_and_args)
            for item in renewing:
                self._lookups(pipe, item)
            await pipe.execute()

    def _lookups(self, pipe: Any, item: _Outgoing) -> None:
        latest = json.dumps({"turn_id": item.turn_id, "session_id": item.session_id})
        pipe.set(f"{PREFIX}latest:{item.operator_id}", latest, px=self._linger_ms)
        owner = f"{PREFIX}turn:{item.turn_id}:operator"
        pipe.set(owner, item.operator_id, px=self._linger_ms)

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
                detail={"reason": type(exc).__name__},
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
        `heartbeat` seconds without one. Ends if the stream expires unfinished (the instance
        running the turn died and nothing more will come). Redis failing meanwhile raises
        `Unavailable`: the SSE writer ends the stream without a terminal frame, which the
        clients re-attach from their Last-Event-ID (the turn goes on where it runs)."""
        stream = f"{PREFIX}frames:{turn_id}"
        position = "0-0"
        block = int((heartbeat or DEFAULT_LONGEST_BLOCK) * 1000)
        while True:
            try:
                answer: Any = await self._redis.xread({stream: position}, block=block, count=500)
                entries = xread_entries(answer)  # (entry id, {b"f": frame JSON})
                if not entries and not await self._redis.exists(stream):
                    return
            except RedisError as exc:
                raise Unavailable(
                    "the turn's frames cannot be read while Redis is unreachable; check "
                    "STEELFRAME_REDIS_URL",
                    detail={"reason": type(exc).__name__},
                ) from exc
            if not entries:
                yield None
                continue
            for entry_id, fields in entries:
                position = entry_id
                frame = NumberedFrame.decode(fields[b"f"])
                if frame.id <= after:
                    continue
                yield frame
                if frame.terminal:
                    return

    async def close(self) -> None:
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self._writer.aclose()
        await self._redis.aclose()
