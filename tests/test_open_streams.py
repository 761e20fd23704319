"""A stream's pump (operator_api.open_streams) leaves no error behind unretrieved: when the
client leaves (aiohttp cancels the handler) and the stream's loop then ends with an error
of its own (a Redis read failing as it was cancelled), asyncio used to report "Task
exception was never retrieved" once the task was collected."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from bot.errors import Unavailable
from operator_api.open_streams import OpenStreams


async def test_a_handler_cancelled_while_its_stream_fails_leaves_no_unretrieved_error() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    streams = OpenStreams()
    reading = asyncio.Event()
    ended = asyncio.Event()

    async def write_events() -> None:
        try:
            reading.set()
            await asyncio.Event().wait()  # a read that blocks until it is cancelled
        except asyncio.CancelledError:
            raise Unavailable("the events stream cannot be read: Redis is unreachable") from None
        finally:
            ended.set()

    handler = asyncio.create_task(streams.pump(write_events()))
    await reading.wait()
    handler.cancel()  # the client left
    with pytest.raises(asyncio.CancelledError):
        await handler
    await ended.wait()
    await asyncio.sleep(0)  # the pump's task settles after its coroutine returned
    gc.collect()  # an unretrieved exception is reported when its task is collected
    loop.set_exception_handler(None)
    assert [c["message"] for c in reported] == []
