"""An acknowledged delivery is durable: kill the service mid-burst, every delivery it
answered 202 is in the database. Plus the benchmark's smoke run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text

from bench import webhooks as bench

pytestmark = pytest.mark.slow  # real `serve` processes, killed and restarted


def stored_ids(database_url: str) -> set[str]:
    from bot.db import create_db_engine

    engine = create_db_engine(database_url)
    try:
        with engine.connect() as connection:
            return set(
                connection.execute(text("SELECT delivery_id FROM github_deliveries")).scalars()
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_no_acknowledged_delivery_is_lost_when_the_process_is_killed(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    database_url = str(request.getfixturevalue("sqlite_url" if kind == "sqlite" else "pg_url"))
    acked: list[str] = []
    async with bench.server_process("steelframe", database_url, tmp_path) as (process, base):
        burst = asyncio.create_task(
            bench.blast(base, bench.payload(), requests=4000, concurrency=32, acked=acked)
        )
        while len(acked) < 300:
            assert not burst.done(), "the burst ended before the kill"
            await asyncio.sleep(0.005)
        process.kill()  # SIGKILL: no shutdown, no flush, mid-burst
        await process.wait()
        _, _, failed = await burst
    assert failed > 0  # requests were in flight (or refused) when it died
    stored = stored_ids(database_url)
    assert len(acked) >= 300
    assert set(acked) <= stored, f"{len(set(acked) - stored)} acknowledged deliveries lost"


def test_the_benchmark_runs_in_smoke_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "signed issues deliveries" in out
    for name in ("bare", "naive", "steelframe"):
        assert f"  {name} " in out
    assert "errors" in out and "sqlite: saturation" in out
