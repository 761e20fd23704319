"""The writing side of the frame relay (bot.chat.frames): every frame a turn publishes goes
through one outbox, written a batch at a time by one flusher; while Redis is away the frames
wait there, in order (a bounded number), and a forget may change those waiting
(`rewrite_held`) before they are written: once Redis answers again, the forgets run through
other instances meanwhile are caught up on first (`catch_up`, bot.chat.coordination), so
none of them is written with the words of a forget this process was not told of."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from bot.chat.frames import (
    MAX_FRAMES,
    PREFIX,
    TERMINAL_FRAMES,
    FramesChange,
    NumberedFrame,
    RelayedTurn,
    lookup_keys,
)
from bot.contracts.chat import StatusFrame
from bot.redis_clients import CancellableRedis

log = logging.getLogger(__name__)
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


@dataclass(frozen=True)
class _Outgoing:
    operator_id: int
    turn_id: str
    session_id: str
    frame: NumberedFrame
    written: asyncio.Future[None] | None  # None: its turn did not wait (Redis was away)


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


class FrameOutbox:
    """The frames published and not written yet, and the one task writing them."""

    def __init__(
        self,
        url: str,
        *,
        linger: float,
        max_held: int = DEFAULT_MAX_HELD,
        catch_up: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`catch_up`: done before the frames that waited for Redis are written (the
        forgets this process missed; a RedisError: Redis is still away)."""
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
        # When each running turn's lookups were last written or renewed (loop time).
        self._lookups_at: dict[str, float] = {}
        self._renew_every = linger / 4
        self._forget_past = FORGET_PAST
        self._catch_up = catch_up

    @property
    def client(self) -> Redis:
        """The writing client, for the relay's other short commands (a rewrite, a scan)."""
        return self._writer

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
            # Outside the lock: what it learns changes the frames waiting (`rewrite_held`).
            if await self._caught_up():
                written, batch = await self._write_head()
            else:
                written, batch = False, []
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

    async def _caught_up(self) -> bool:
        """After an outage, the forgets missed meanwhile are done on the frames waiting
        before any is written; False while Redis is away."""
        if not self._down or self._catch_up is None:
            return True
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):  # a frozen Redis, as a write's
                await self._catch_up()
        except (RedisError, TimeoutError):
            return False
        except Exception:  # a defect of the catch-up must not keep every frame unwritten
            log.warning("catching up on forgets before writing frames failed", exc_info=True)
        return True

    async def _write_head(self) -> tuple[bool, list[_Outgoing]]:
        """The head's batch written (True; taken out) or failed by Redis (False; kept)."""
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
        return written, batch

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
        lookups = [key for item in due for key in lookup_keys(item.operator_id, item.turn_id)]
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
        latest_key, owner_key = lookup_keys(item.operator_id, item.turn_id)
        latest = json.dumps({"turn_id": item.turn_id, "session_id": item.session_id})
        pipe.set(latest_key, latest, px=self._linger_ms)
        pipe.set(owner_key, item.operator_id, px=self._linger_ms)

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
        await self._writer.aclose()
