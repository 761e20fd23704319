"""`kill -9` of a real `steelframe serve` mid-burst: after a restart every delivery is
processed within 30 s (the dead process's claims lapse in seconds and are taken over), and
nothing is done twice: each issue's text is stored once, the restarted process runs each
delivery once, and only the few deliveries whose outcome the dead process had not yet
committed run again (handlers are idempotent, so even those double nothing)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from bench.webhooks import Connection
from tests.conftest import GITHUB_DATA
from tests.fakes.serve_process import serve
from webhooks.processor import RECORD_EVERY
from webhooks.signature import signature_for

SECRET = "crash-test-secret"
BURST = 2000
KILL_AFTER = 600
RAN = re.compile(r"issues\.opened \S+#\d+ \[(crash-\d+)\]")


def deliveries() -> list[tuple[str, bytes]]:
    """BURST `issues.opened` deliveries about distinct issues (GitHub's real example)."""
    base = json.loads((GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text())
    base["issue"].update(milestone=None, assignee=None, assignees=[])
    out = []
    for n in range(1, BURST + 1):
        base["issue"].update(number=n, id=10_000_000 + n, title=f"Crash issue {n}")
        out.append((f"crash-{n:04}", json.dumps(base, separators=(",", ":")).encode()))
    return out


def raw_request(port: int, delivery: str, body: bytes) -> bytes:
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature_for(SECRET, body),
    }
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return f"POST /api/github/webhooks HTTP/1.1\r\n{head}\r\n".encode() + body


async def send_all(
    port: int, items: list[tuple[str, bytes]], acked: list[str], *, clients: int = 16
) -> None:
    """Send every delivery once from `clients` keep-alive connections; acknowledged ids
    (202, or 200 for one already stored) go to `acked` as the answers arrive."""
    queue = iter(items)

    async def client() -> None:
        connection = Connection("127.0.0.1", port)
        for delivery, body in queue:
            try:
                status = await connection.send(raw_request(port, delivery, body))
            except (OSError, ValueError, asyncio.IncompleteReadError):
                connection.close()
                connection = Connection("127.0.0.1", port)
                continue
            if status in (200, 202):
                acked.append(delivery)
        connection.close()

    await asyncio.gather(*[client() for _ in range(clients)])


def scalar(url: str, sql: str) -> Any:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql)).scalar()
    finally:
        engine.dispose()


def ran(log: str) -> list[str]:
    return RAN.findall(log)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_kill_9_mid_burst_then_every_delivery_is_processed_within_30s_and_none_twice(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue("sqlite_url" if kind == "sqlite" else "pg_url"))
    env = {
        "STEELFRAME_DATABASE_URL": url,
        "WEBHOOK_SECRET": SECRET,
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "STEELFRAME_LOG_LEVEL": "INFO",  # each handler run logs one line with its id
    }
    items = deliveries()
    acked: list[str] = []
    async with serve(env, tmp_path, tmp_path / "first.log") as first:
        burst = asyncio.create_task(send_all(first.port, items, acked))
        while len(acked) < KILL_AFTER:
            assert not burst.done(), "the burst ended before the kill"
            await asyncio.sleep(0.005)
        # Processing yields to a busy intake: kill once it holds a claimed batch, so the
        # restart has one to take over (on a loaded machine that may take a moment).
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                claimed_sql = text(
                    "SELECT count(*) FROM github_deliveries WHERE status = 'processing'"
                )
                while not connection.execute(claimed_sql).scalar():
                    assert not burst.done(), "the burst ended before a batch was claimed"
                    connection.commit()  # a fresh snapshot for the next look
                    await asyncio.sleep(0.01)
        finally:
            engine.dispose()
        first.process.kill()  # SIGKILL: no shutdown, no drain, claims left behind
        await first.process.wait()
        await burst
    claimed = scalar(url, "SELECT count(*) FROM github_deliveries WHERE status = 'processing'")
    assert claimed > 0, "the kill left no claimed batch behind: the test proves nothing"
    restarted = time.monotonic()
    async with serve(env, tmp_path, tmp_path / "second.log") as second:
        # GitHub's "redeliver" for what was never acknowledged (some were stored anyway).
        unanswered = [item for item in items if item[0] not in set(acked)]
        again: list[str] = []
        await send_all(second.port, unanswered, again)
        assert sorted(again) == sorted(d for d, _ in unanswered)
        done = 0
        while done < BURST:
            elapsed = time.monotonic() - restarted
            assert elapsed < 30, f"{done} of {BURST} processed {elapsed:.0f}s after restart"
            await asyncio.sleep(0.25)
            done = scalar(url, "SELECT count(*) FROM github_deliveries WHERE status = 'processed'")
        second_runs = ran(second.log_text())
    first_runs = ran(first.log_text())
    everything = {delivery for delivery, _ in items}
    assert set(first_runs) | set(second_runs) == everything
    assert not [d for d, n in Counter(second_runs).items() if n > 1], "run twice after restart"
    assert not [d for d, n in Counter(first_runs).items() if n > 1], "run twice before the kill"
    # Run by both: only those whose outcome the killed process had not committed yet.
    both = set(first_runs) & set(second_runs)
    assert len(both) <= 2 * RECORD_EVERY, f"{len(both)} deliveries ran in both processes"
    # ...and nothing was doubled: one stored text per issue, none replaced.
    chunks = scalar(url, "SELECT count(*) FROM memory_chunks WHERE key LIKE 'issue:%'")
    assert chunks == BURST
