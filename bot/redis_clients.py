"""Redis clients for blocking reads (`XREAD BLOCK`): their socket timeout outlasts the block.

redis-py (8) gives every client a 5 s socket timeout by default, so an `XREAD BLOCK 15000`
(a heartbeat's wait with nothing new) failed with TimeoutError after 5 s: the operator events
stream and a chat turn resumed on another instance died after five quiet seconds. Tests with a
0.2 s heartbeat never waited that long; tests/test_instances.py, with real processes and the
default heartbeat, did.

The connect gets the same allowance. redis-py's 5 s connect timeout is timed on the event
loop: a connect done by the kernel at once still fails if the loop takes longer than that to
get back to it, as when many streams (re)connect at once on a loaded host. At a load average
of 20, 300 operators' streams opened together failed some connects with "Timeout connecting
to server" (tests/test_events.py), each such stream broken. A Redis that refuses still fails
at once; only one that does not answer takes the longer allowance to say so.

Every asyncio client of the service is a `CancellableRedis`: redis-py's asyncio client
(8.2.0) sometimes returns a command's reply although the task awaiting it was cancelled
meanwhile, so the cancellation is lost and the task runs on (tests/test_redis_cancellation.py:
82 of 300 cancels landing at random points of GET, XRANGE, XREAD). An operator's events stream
cancelled at shutdown then went back to its XREAD and held the shutdown a minute.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis

DEFAULT_LONGEST_BLOCK = 15.0  # seconds: the default SSE heartbeat (STEELFRAME_HEARTBEAT_SECONDS)
BLOCK_MARGIN_SECONDS = 10.0  # for Redis to answer once the block is over
# Each stream a client waits on (an operator's events, a chat turn resumed from another
# instance) holds one connection in its blocking read. redis-py's pool stops at 100 and
# fails the next with MaxConnectionsError: the 101st operator's events stream broke.
# Redis's own default limit is 10,000 clients.
MAX_BLOCKING_READS = 10_000


class CancellableRedis(aioredis.Redis):
    """redis-py's asyncio client, with a cancellation that arrived while a command ran
    raised when the command returns (redis-py let it go and returned the reply). Pipelines
    are redis-py's own, unchanged."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        task = asyncio.current_task()
        cancels = task.cancelling() if task is not None else 0
        reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if task is not None and task.cancelling() > cancels:
            raise asyncio.CancelledError  # asked for while the command ran, and dropped
        return reply


def blocking_reader(url: str, *, longest_block: float = DEFAULT_LONGEST_BLOCK) -> aioredis.Redis:
    """A client whose reads may block up to `longest_block` seconds in Redis, as many at
    once as there are streams to wait on (up to MAX_BLOCKING_READS)."""
    allowance = longest_block + BLOCK_MARGIN_SECONDS
    return CancellableRedis.from_url(
        url,
        socket_timeout=allowance,
        socket_connect_timeout=allowance,
        max_connections=MAX_BLOCKING_READS,
    )


def xread_entries(answer: Any) -> list[Any]:
    """The entries, `(entry id, {field: value})`, of an XREAD answer, in either reply shape:
    RESP2's `[[stream, entries], ...]` or RESP3's `{stream: [entries]}` (a
    STEELFRAME_REDIS_URL ending in `?protocol=3`)."""
    if not answer:
        return []
    if isinstance(answer, dict):
        found: list[Any] = []
        for value in answer.values():
            # redis-py wraps each stream's entries in one more list under RESP3
            nested = bool(value) and isinstance(value[0], list)
            found.extend(value[0] if nested else value)
        return found
    return [entry for _, entries in answer for entry in entries]
