"""The operator API's open events streams, ended when the service shuts down.

aiohttp's shutdown waits for every running handler, up to its shutdown timeout (60 s),
before it cancels them, and an events stream's handler runs until its client leaves: a
`serve` stopped while an operator's browser was open took two minutes to exit (past
systemd's default 90 s before SIGKILL). On shutdown (aiohttp's `on_shutdown`, run once the
listening sockets are closed and before that wait) each events stream's pump is cancelled
and its handler ends the response normally. Nothing is lost by it: the GUI's EventSource and
the TUI re-open the stream with Last-Event-ID, on another instance or on this one once it is
back, and the events are kept in Redis.

A chat turn's stream is not ended here: it ends with its turn. Right after the events
streams, shutdown lets the turns a client here is watching finish within
STEELFRAME_SHUTDOWN_GRACE_SECONDS, then ends every turn still running
(bot.chat.inflight.TurnRegistry.shut_down): each says in its session that it did not
complete and sends its terminal `error` frame (reason `cancelled`), relayed through Redis
while the relay is still open. The watching clients read that frame on the stream they
have, and their handlers end, so aiohttp's own wait (a minute, past the supervisor's stop
timeout) is not waited out; a client re-attaching later, here or on another instance, reads
the same end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from aiohttp import web

from operator_api.deps import OPERATOR_API


class OpenStreams:
    """The pumps of the streams this process is writing."""

    def __init__(self) -> None:
        self._pumps: set[asyncio.Task[None]] = set()
        self._closed: asyncio.Future[None] | None = None  # made on the serving loop
        self.closing = False

    async def pump(self, writing: Coroutine[Any, Any, None]) -> None:
        """Run `writing` (one stream's loop, which closes what it reads from) until it ends,
        or until the service shuts down; its exceptions are the caller's. A task of its own,
        so that shutdown ends only the loop and the handler still finishes its response."""
        if self.closing:
            writing.close()
            return
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(writing)
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)
        try:
            await asyncio.wait((task, self._closed), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()  # the handler itself was cancelled (its client left)
            # How the loop ends is of no interest then; an error it ends with (a Redis read
            # failing as it is cancelled) is retrieved, not reported as never retrieved.
            task.add_done_callback(_settled)
            raise
        if task.done():
            task.result()
            return
        # Shut down: not waited for. A Redis read under way returns first (up to a
        # heartbeat's block), and the cancellation is raised then (bot.redis_clients).
        task.cancel()
        task.add_done_callback(_settled)

    def close(self) -> None:
        """End every stream's pump; a stream opened from now on ends at once."""
        self.closing = True
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)


def _settled(task: asyncio.Task[None]) -> None:
    """A pump ended after its stream or its handler: how is of no interest (its client is
    gone)."""
    if not task.cancelled():
        task.exception()


OPEN_STREAMS = web.AppKey("open_streams", OpenStreams)


def setup(app: web.Application) -> None:
    """Give the app its streams, ended on shutdown, and end its chat turns after them."""
    streams = app[OPEN_STREAMS] = OpenStreams()

    async def end_streams(app: web.Application) -> None:
        streams.close()
        api = app.get(OPERATOR_API)
        if api is not None:  # absent if start-up failed
            await api.registry.shut_down(grace=api.settings.shutdown_grace_seconds)

    app.on_shutdown.append(end_streams)
