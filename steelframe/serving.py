"""Running the web service until a signal: bind, say where, serve, stop cleanly.

Like aiohttp's `run_app`, with the bound address printed (port 0 resolves to a real port)
and SO_REUSEPORT for `--processes`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from aiohttp import web

from bot.stop_request import StopRequest
from steelframe.collector import tune_for_serving
from steelframe.protocol_log import QuietAppRunner

# Connections the kernel may hold for `accept` (clamped to net.core.somaxconn). aiohttp's
# default, 128, overflows when 1,000 operators open chat streams within a second while the
# loop is busy: the dropped SYNs are retried after 1 s, then 3 s, which was the 2-8 s first
# frame p99 of bench/chat_streams.py.
LISTEN_BACKLOG = 4096


async def serve_until_stopped(
    app: web.Application,
    *,
    host: str,
    port: int,
    reuse_port: bool = False,
    access_log: logging.Logger | None = None,
    announce: Callable[[str], None] | None = None,
    stop_request: StopRequest | None = None,
) -> None:
    """`announce` is given the URL once the port is bound (`steelframe.listening`).
    `stop_request` holds a stop signalled during start-up (the app's parts starting): the
    service then stops without listening."""
    runner = QuietAppRunner(app, access_log=access_log, handle_signals=False)
    await runner.setup()
    tune_for_serving()
    try:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):  # not every platform has it
                loop.add_signal_handler(sig, stop.set)
        # Checked after the loop took the signals: one lands in the request or the loop.
        if stop_request is not None and stop_request.requested:
            return
        site = web.TCPSite(
            runner, host, port, reuse_port=reuse_port or None, backlog=LISTEN_BACKLOG
        )
        await site.start()
        if announce is not None:
            bound = runner.addresses[0][1] if runner.addresses else port
            announce(f"http://{host}:{bound}")
        await stop.wait()
    finally:
        await runner.cleanup()
