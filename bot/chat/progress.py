"""Progress frames while a turn waits on GitHub (a filing, a publish): the operator sees
`status` frames instead of a silent stream. GitHub's write pacing (1 s between writes per
installation) makes a filing take seconds; against the local sandbox it is instant and no
frame is sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from bot.contracts.chat import Emit, StatusFrame

# Nothing is said for a wait shorter than this; then a frame every TICK_SECONDS.
QUIET_SECONDS = 0.3
TICK_SECONDS = 1.0


@contextlib.asynccontextmanager
async def progress_while(
    emit: Emit,
    doing: str,
    *,
    quiet: float = QUIET_SECONDS,
    tick: float = TICK_SECONDS,
) -> AsyncIterator[None]:
    """Send `status` frames, "<doing> · N s", while the body runs."""
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def ticker() -> None:
        await asyncio.sleep(quiet)
        while True:
            waited = loop.time() - started
            await emit(StatusFrame(text=f"{doing} · {waited:.0f} s"))
            await asyncio.sleep(tick)

    task = asyncio.create_task(ticker())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
