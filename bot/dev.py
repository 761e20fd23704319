"""`steelframe dev`: the whole system on embedded defaults, no network, no credentials.

SQLite file under ./var, the offline runtime and a fresh token for the `dev` operator.
Whatever the environment configures (database URL, a real model, WEBHOOK_SECRET) overrides
these defaults. Other packages add their embedded parts through `DEV_EXTRAS`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Callable
from typing import Any

from aiohttp import web
from sqlalchemy import select

from bot.appkeys import SERVICES
from bot.cli import configure_logging, load_settings
from bot.config import Settings
from bot.db import Database
from bot.models import Operator
from bot.operators import create_operator, rotate_token

DEV_OPERATOR = "dev"
DEV_DEFAULTS: dict[str, Any] = {"database_url": "sqlite:///var/dev.db"}


def register(subparsers: Any) -> None:
    dev = subparsers.add_parser("dev", help="run everything locally on embedded defaults")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    dev.set_defaults(handler=cmd_dev)


def dev_token(session: Any) -> str:
    """A fresh token for the dev operator (tokens are stored hashed, so a new one each start)."""
    if session.scalar(select(Operator).where(Operator.name == DEV_OPERATOR)) is None:
        return create_operator(session, DEV_OPERATOR)[1]
    return rotate_token(session, DEV_OPERATOR)


def cmd_dev(args: argparse.Namespace) -> int:
    settings = load_settings(**DEV_DEFAULTS)
    configure_logging(settings.log_level)
    asyncio.run(run_dev(settings, host=args.host, port=args.port))
    return 0


async def run_dev(
    settings: Settings, *, host: str, port: int, ready: Callable[[str, str], None] | None = None
) -> None:
    from bot.server import create_app

    print("steelframe dev: preparing the database ...", flush=True)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port
    url = f"http://{host}:{bound}"
    database: Database = app[SERVICES].db
    token = await database.run(dev_token)
    print(f"runtime: {settings.runtime} · database: {_safe_url(settings.database_url)}", flush=True)
    print(f"url: {url}", flush=True)
    print(f"token: {token}", flush=True)
    if ready is not None:
        ready(url, token)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        print("steelframe dev: shutting down", flush=True)
        await runner.cleanup()


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
