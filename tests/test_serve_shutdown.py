"""A `steelframe serve` told to stop (SIGTERM, as systemd and a deploy send it) with an
operator's events stream open exits at once: the stream ends cleanly (its client re-opens it
with Last-Event-ID) instead of holding the shutdown for aiohttp's one-minute wait, twice,
which took two minutes, past systemd's 90 s before it kills."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from bot.db import Database
from bot.operators import create_operator
from tests.fakes.serve_process import serve

pytestmark = pytest.mark.slow  # a real serve

# Below aiohttp's shutdown timeout (60 s), which a stream that nothing ends waits out; far
# above the fraction of a second an exit takes here, for a loaded machine.
EXIT_BOUND_SECONDS = 30.0


async def test_serve_stopped_with_an_events_stream_open_ends_it_and_exits(
    tmp_path: Path, redis_url: str
) -> None:
    database = f"sqlite:///{tmp_path / 'steelframe.db'}"
    settings = {
        "STEELFRAME_DATA_DIR": str(tmp_path / "data"),
        "STEELFRAME_DATABASE_URL": database,
        "STEELFRAME_REDIS_URL": redis_url,  # the events stream's log
    }
    async with serve(settings, tmp_path, tmp_path / "serve.log") as served:
        db = Database.from_url(database)  # migrated by serve at start
        try:
            _, token = db.call(create_operator, "ada")
        finally:
            db.dispose()
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{served.url}/api/operator/events", headers=headers) as stream,
        ):
            assert stream.status == 200
            assert (await stream.content.readline()).startswith(b"id: ")  # it is open
            served.process.send_signal(signal.SIGTERM)
            rest = await asyncio.wait_for(stream.content.read(), EXIT_BOUND_SECONDS)
            assert rest.strip() == b""  # ended, not broken: no error frame, nothing lost
        code = await asyncio.wait_for(served.process.wait(), EXIT_BOUND_SECONDS)
    assert code == 0, served.log_text()[-2000:]
    assert "Traceback" not in served.log_text()
