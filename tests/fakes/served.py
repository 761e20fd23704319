"""An aiohttp application served on a free loopback port, for a test's fake upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web


@asynccontextmanager
async def served(app: web.Application, **runner_options: Any) -> AsyncIterator[int]:
    """Serve `app` on 127.0.0.1 at a port the system picks until the block ends; yields
    the port. `runner_options` go to `web.AppRunner` (access_log, handler_cancellation...)."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
