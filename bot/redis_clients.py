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
cancelled at shutdown then went back to its XREAD and held the shutdown a minute. Its pipelines
(the frame relay's writes, `transaction()`) and its pubsubs (the chat stop listener) lose
cancels the same way and get the same guarantee. The cause is redis-py's send of a command
under `asyncio.wait_for`, which on Python 3.11 returns the inner result when the cancel lands
just as the send is done (no socket timeout, no loss); the report for redis-py, with a
standalone reproduction: docs/upstream/redis-py-lost-cancellation.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline, PubSub
from redis.typing import EncodableT

DEFAULT_LONGEST_BLOCK = 15.0  # seconds: the default SSE heartbeat (STEELFRAME_HEARTBEAT_SECONDS)
BLOCK_MARGIN_SECONDS = 10.0  # for Redis to answer once the block is over
# Each stream a client waits on (an operator's events, a chat turn resumed from another
# instance) holds one connection in its blocking read. redis-py's pool stops at 100 and
# fails the next with MaxConnectionsError: the 101st operator's events stream broke.
# Redis's own default limit is 10,000 clients.
MAX_BLOCKING_READS = 10_000


T = TypeVar("T")


async def _cancellation_kept(call: Awaitable[T]) -> T:
    """`await call`, and raise the cancellation of this task that arrived meanwhile if redis-py
    let it go and returned instead. The one place the guarantee lives: a task cancelled while
    it awaited Redis never runs on past the call.

    A cancellation redis-py did raise never reaches the check; one requested before the call
    (a task cleaning up after its cancel) is not counted again."""
    task = asyncio.current_task()
    cancels = task.cancelling() if task is not None else 0
    result = await call
    if task is not None and task.cancelling() > cancels:
        raise asyncio.CancelledError  # asked for while Redis was awaited, and dropped
    return result


class CancellablePipeline(Pipeline):
    """redis-py's asyncio pipeline whose awaited calls keep a cancellation: `execute()`,
    the commands it runs at once (WATCH and what follows it before MULTI, `transaction()`'s
    reads, the script loads of `execute()`) and `reset()` (the UNWATCH of `async with`'s
    exit). Queuing a command awaits nothing."""

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        return await _cancellation_kept(super().execute(raise_on_error))

    async def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        immediate = super().immediate_execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return await _cancellation_kept(immediate)

    # Pipeline.reset (the pipeline's own: empty the queue, UNWATCH, give the connection back)
    # already hides the RESET command's method of redis-py's command mixins, untyped there.
    async def reset(self) -> None:  # type: ignore[override]
        await _cancellation_kept(super().reset())  # type: ignore[no-untyped-call]


class CancellablePubSub(PubSub):
    """redis-py's asyncio pubsub whose sends (SUBSCRIBE, UNSUBSCRIBE, PING) and reads
    (`get_message`, `listen`, which send the health-check PING first when one is due) keep a
    cancellation: a stop listener cancelled while it subscribed went on to wait in `listen()`
    for a message that might never come (tests/test_redis_cancellation.py, "pubsub")."""

    async def execute_command(self, *args: EncodableT) -> None:
        await _cancellation_kept(super().execute_command(*args))

    # redis-py's signature, `timeout` and all: listen() and get_message() call it so.
    async def parse_response(self, block: bool = True, timeout: float = 0) -> Any:  # noqa: ASYNC109
        return await _cancellation_kept(super().parse_response(block, timeout))


class CancellableRedis(aioredis.Redis):
    """redis-py's asyncio client, with a cancellation that arrived while a command ran
    raised when the command returns (redis-py let it go and returned the reply), and the
    same for its pipelines (`pipeline()`, `transaction()`) and pubsubs (`pubsub()`). Scripts
    (`register_script`) run through `execute_command` (or a pipeline's `execute()`), so they
    are covered too. Why, and the report for redis-py:
    docs/upstream/redis-py-lost-cancellation.md."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        command = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return await _cancellation_kept(command)

    def pipeline(
        self, transaction: bool = True, shard_hint: str | None = None
    ) -> CancellablePipeline:
        # As redis-py's own Redis.pipeline builds its Pipeline, with our class.
        return CancellablePipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )

    def pubsub(self, **kwargs: Any) -> CancellablePubSub:
        # As redis-py's own Redis.pubsub builds its PubSub (the client's event dispatcher
        # too: re-authentication listeners), with our class.
        return CancellablePubSub(
            self.connection_pool, event_dispatcher=self._event_dispatcher, **kwargs
        )


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
