"""Unauthenticated cost is bounded: 10 concurrent 24 MB bodies with a wrong signature (240 MB,
almost four times the 64 MB in flight webhooks.body allows) grow a real `steelframe serve`'s
resident memory by less than 120 MB (each body is hashed as it is
read into one buffer, and the bytes in flight are capped: beyond, 503 with Retry-After)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from bench.webhook_memory import MB, forged
from tests.fakes.serve_process import serve

pytestmark = pytest.mark.slow  # ten large bodies against a real `serve`

SECRET = "memory-test-secret"
BODY_SIZE = 24 * 1024 * 1024
# bench.webhook_memory measures 30 such bodies (55 MB of growth against a naive handler's
# 678 MB); here ten are enough that holding them all (240 MB) would fail the bound.
CLIENTS = 10
GROWTH_BOUND_MB = 120


async def test_concurrent_24mb_forged_bodies_grow_rss_by_less_than_the_bytes_they_carry(
    tmp_path: Path, sqlite_url: str
) -> None:
    env = {
        "STEELFRAME_DATABASE_URL": sqlite_url,
        "WEBHOOK_SECRET": SECRET,
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "STEELFRAME_LOG_LEVEL": "WARNING",
    }
    body = b'{"zen":"' + b"x" * (BODY_SIZE - 10) + b'"}'
    async with serve(env, tmp_path, tmp_path / "serve.log") as served:
        process = psutil.Process(served.pid)
        await forged(served.port, body[: 64 * 1024])  # warm the route with a small one
        baseline = peak = process.memory_info().rss
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, process.memory_info().rss)
                await asyncio.sleep(0.005)

        sampler = asyncio.create_task(sample())
        answers = await asyncio.gather(*[forged(served.port, body) for _ in range(CLIENTS)])
        done.set()
        await sampler
        peak = max(peak, process.memory_info().rss)
    statuses = sorted(status for status, _ in answers)
    assert set(statuses) <= {401, 503}, statuses
    assert 401 in statuses  # some were read (and hashed) whole, then refused
    assert 503 in statuses  # the rest did not fit the budget...
    assert all(retry == "5" for status, retry in answers if status == 503)  # ...come back later
    growth = (peak - baseline) / MB
    assert growth < GROWTH_BOUND_MB, f"resident memory grew by {growth:.0f} MB"
