"""One append-only log of events per operator, readable from an id (docs/api.md, "Events").

With Redis each operator's log is a Redis stream `steelframe:events:op:<id>` capped with
MAXLEN, so every instance sees every event and a client resumes on whichever instance it
reaches. Ids are plain integers from a per-operator counter, incremented in the same Lua
call as the XADD (the entry id is `<n>-1`), so they are monotonic per operator and an SSE
`Last-Event-ID` is one number. Without Redis, `LocalEventLog` keeps the same shape in
process (one process is then the whole system).

`append` is synchronous and thread-safe: it is called after database commits, which run in
worker threads of the web service and in RQ jobs alike. Reading is async.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.contracts.errors import ErrorDetail
from bot.contracts.events import MISSED_REASON, EventFrame, ResyncFrame
from bot.errors import Unavailable
from bot.redis_clients import blocking_reader, xread_entries

log = logging.getLogger(__name__)

# Events kept per operator: a client that was away for longer than this many events gets a
# `resync` event and reloads instead of a replay (DEFAULT_MAXLEN is ~days of a busy board).
DEFAULT_MAXLEN = 1000
KEY_PREFIX = "steelframe:events:op:"
READ_COUNT = 100
# The counter and the stream move together; should the counter be lost while the stream is
# not (an eviction), the next id still follows the stream's newest one.
_APPEND = """
local n = redis.call('INCR', KEYS[2])
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if top[1] then
  local newest = tonumber(string.match(top[1][1], '^(%d+)'))
  if newest >= n then
    n = newest + 1
    redis.call('SET', KEYS[2], n)
  end
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], n .. '-1', 'e', ARGV[1])
return n
"""


@dataclass(frozen=True)
class Event:
    """One event of an operator's log: its id and its frame (which carries the id too)."""

    id: int
    frame: EventFrame

    @property
    def type(self) -> str:
        return str(type(self.frame).__struct_config__.tag)  # the frame's `type` tag


@dataclass(frozen=True)
class Batch:
    """Events after the asked id; `gap` when some between were already dropped (or the log
    restarted below the client's id), so the client must reload what it shows."""

    events: list[Event] = field(default_factory=list)
    gap: bool = False
    last_id: int = 0


class EventLog(Protocol):
    def append(self, operator_id: int, frame: EventFrame) -> int: ...

    async def read(self, operator_id: int, after: int, *, wait: float) -> Batch:
        """Events with id > after; waits up to `wait` seconds for one when there are none.
        Raises `Unavailable` when the log cannot be read (its Redis failed)."""

    async def last_id(self, operator_id: int) -> int:
        """The newest id given out; `Unavailable` when the log cannot be read."""

    async def close(self) -> None: ...


_DECODER = msgspec.json.Decoder(EventFrame)


def _encode(frame: EventFrame) -> bytes:
    return msgspec.json.encode(frame)


def _decode(event_id: int, raw: str | bytes) -> Event:
    """The stored frame with the log's id; one that no longer decodes (written by an older
    release) reads as a `resync`, so the client reloads instead of missing it."""
    try:
        frame = _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        log.info("events: event %s not readable (%s); sent as a resync", event_id, exc)
        frame = ResyncFrame(reason=MISSED_REASON)
    return Event(event_id, msgspec.structs.replace(frame, id=event_id))


class LocalEventLog:
    """The in-process log: a bounded deque per operator; readers wake on appends from any
    thread (the loop they wait on is told with call_soon_threadsafe)."""

    def __init__(self, *, maxlen: int = DEFAULT_MAXLEN) -> None:
        self.maxlen = maxlen
        self._lock = threading.Lock()
        self._events: dict[int, deque[Event]] = {}
        self._last: dict[int, int] = {}
        self._waiters: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def append(self, operator_id: int, frame: EventFrame) -> int:
        stored = _encode(frame)  # as Redis would keep it: what cannot be encoded fails here
        with self._lock:
            number = self._last.get(operator_id, 0) + 1
            self._last[operator_id] = number
            kept = self._events.setdefault(operator_id, deque(maxlen=self.maxlen))
            kept.append(_decode(number, stored))
            waiters = list(self._waiters.get(operator_id, ()))
        for loop, woken in waiters:
            loop.call_soon_threadsafe(woken.set)
        return number

    def _after(self, operator_id: int, after: int) -> Batch:
        with self._lock:
            kept = list(self._events.get(operator_id, ()))
            last = self._last.get(operator_id, 0)
        oldest = kept[0].id if kept else last + 1
        if after > last or after < oldest - 1:
            return Batch(gap=True, last_id=last)
        newer = [event for event in kept if event.id > after]
        return Batch(newer[:READ_COUNT], last_id=last)

    async def last_id(self, operator_id: int) -> int:
        with self._lock:
            return self._last.get(operator_id, 0)

    async def read(self, operator_id: int, after: int, *, wait: float) -> Batch:
        woken = asyncio.Event()
        entry = (asyncio.get_running_loop(), woken)
        with self._lock:
            self._waiters.setdefault(operator_id, set()).add(entry)
        try:
            batch = self._after(operator_id, after)
            if batch.events or batch.gap:
                return batch
            try:
                await asyncio.wait_for(woken.wait(), wait)
            except TimeoutError:
                return batch
            return self._after(operator_id, after)
        finally:
            with self._lock:
                self._waiters.get(operator_id, set()).discard(entry)

    async def close(self) -> None:
        return None


class RedisEventLog:
    """The log in Redis streams: appends through the synchronous client the caller already
    has (workers, the web service's thread pool), reads through an asyncio client that
    blocks in XREAD until an event or the wait is over."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        reader: aioredis.Redis | None = None,
        maxlen: int = DEFAULT_MAXLEN,
    ) -> None:
        self.client = client
        self.reader = reader
        self.maxlen = maxlen
        self._append = client.register_script(_APPEND)

    @classmethod
    def from_url(cls, url: str, *, maxlen: int = DEFAULT_MAXLEN) -> RedisEventLog:
        return cls(redis.Redis.from_url(url), reader=blocking_reader(url), maxlen=maxlen)

    @staticmethod
    def keys(operator_id: int) -> tuple[str, str]:
        stream = f"{KEY_PREFIX}{operator_id}"
        return stream, f"{stream}:seq"

    def append(self, operator_id: int, frame: EventFrame) -> int:
        return int(
            self._append(keys=list(self.keys(operator_id)), args=[_encode(frame), self.maxlen])
        )

    async def read(self, operator_id: int, after: int, *, wait: float) -> Batch:
        try:
            return await self._read(operator_id, after, wait=wait)
        except RedisError as exc:
            raise _unreadable(exc) from exc

    async def _read(self, operator_id: int, after: int, *, wait: float) -> Batch:
        if self.reader is None:
            raise RuntimeError("this RedisEventLog was built without a reader")
        stream, counter = self.keys(operator_id)
        raw_last = await self.reader.get(counter)
        last = int(raw_last or 0)
        if after > last:
            return Batch(gap=True, last_id=last)
        oldest: Any = await self.reader.xrange(stream, "-", "+", count=1)
        first = _entry_number(oldest[0][0]) if oldest else last + 1
        if after < first - 1:
            return Batch(gap=True, last_id=last)
        found: Any = await self.reader.xread(
            {stream: f"{after}-1"}, count=READ_COUNT, block=max(1, int(wait * 1000))
        )
        events = [
            _decode(_entry_number(entry_id), fields[b"e"])
            for entry_id, fields in xread_entries(found)
        ]
        return Batch(events, last_id=max([last, *(e.id for e in events)]))

    async def last_id(self, operator_id: int) -> int:
        if self.reader is None:
            raise RuntimeError("this RedisEventLog was built without a reader")
        try:
            return int(await self.reader.get(self.keys(operator_id)[1]) or 0)
        except RedisError as exc:
            raise _unreadable(exc) from exc

    async def close(self) -> None:
        if self.reader is not None:
            await self.reader.aclose()


def _unreadable(exc: RedisError) -> Unavailable:
    """A Redis failure as the domain's 503 (redis-py already retried the command): before a
    stream's headers the error middleware answers it, after them the stream ends (the
    client re-opens it with Last-Event-ID)."""
    return Unavailable(
        "the events stream cannot be read while Redis is unreachable; check STEELFRAME_REDIS_URL",
        detail=ErrorDetail(reason=type(exc).__name__),
    )


def _entry_number(entry_id: bytes | str) -> int:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-", 1)[0])
