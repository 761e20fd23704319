"""Webhook intake: signed `issues` deliveries through the real endpoint, beside two handlers
measured in the same run.

- bare: aiohttp reads the body and answers 202 (the ceiling: no verification, no storage).
- naive: verifies the signature, parses, inserts the row with a synchronous SQLAlchemy
  session in a thread, commits, answers 202 (the floor: one transaction per delivery).
- steelframe: the real service (`create_app`): verify, check what handlers need, group
  commit of concurrent deliveries, answer 202 only after the commit, process afterwards.

Each server runs in its own process; the load generator sends deliveries with distinct
GUIDs from `--concurrency` clients and measures each request's latency. The payload is
GitHub's real `issues.opened` example as a fresh issue (no milestone or assignees), compact
JSON as GitHub sends it.

    python -m bench.webhooks [--requests 4000] [--concurrency 64] [--db sqlite,postgres] [--smoke]
    python -m bench.webhooks serve --impl steelframe|naive|bare --database-url URL
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from aiohttp import web

from bench._stats import percentile, ratio

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT.parent / "shared/github/webhook-examples/issues/opened.payload.json"
SECRET = "bench-webhook-secret"
PG_URL = os.environ.get(
    "STEELFRAME_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IMPLS = ("bare", "naive", "steelframe")


def payload() -> bytes:
    data = json.loads(EXAMPLE.read_text())
    data["issue"].update(milestone=None, assignee=None, assignees=[])
    return json.dumps(data, separators=(",", ":")).encode()


def headers_for(body: bytes, delivery: str) -> dict[str, str]:
    from webhooks.signature import signature_for

    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature_for(SECRET, body),
    }


# -- the servers (run in a child process) -------------------------------------------------


def bare_app() -> web.Application:
    async def receive(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"status": "accepted"}, status=202)

    app = web.Application(client_max_size=26 * 1024 * 1024)
    app.router.add_post("/api/github/webhooks", receive)
    return app


def naive_app(database_url: str) -> web.Application:
    from bot.clock import utcnow
    from bot.db import Database, upgrade
    from bot.errors import Unauthorized
    from webhooks.deliveries import DeliveryBody, DeliveryStatus, WebhookDelivery
    from webhooks.signature import verify_signature

    db = Database.from_url(database_url)
    upgrade(db.engine)

    def store(delivery: str, event: str, data: dict[str, Any], text: str) -> None:
        with db.session() as session:
            session.add(
                WebhookDelivery(
                    delivery_id=delivery,
                    event=event,
                    action=data.get("action"),
                    installation_id=None,
                    repo=data["repository"]["full_name"],
                    status=DeliveryStatus.RECEIVED,
                    received_at=utcnow(),
                    attempts=0,
                )
            )
            session.add(DeliveryBody(delivery_id=delivery, body=text))

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            verify_signature(SECRET, body, request.headers.get("X-Hub-Signature-256"))
        except Unauthorized:
            return web.json_response({"error": "bad signature"}, status=401)
        data = json.loads(body)
        await asyncio.to_thread(
            store,
            request.headers["X-GitHub-Delivery"],
            request.headers["X-GitHub-Event"],
            data,
            body.decode(),
        )
        return web.json_response({"status": "accepted"}, status=202)

    app = web.Application(client_max_size=26 * 1024 * 1024)
    app.router.add_post("/api/github/webhooks", receive)
    return app


def steelframe_app(database_url: str, data_dir: Path) -> web.Application:
    from bot.config import Settings
    from bot.config_values import Secret
    from steelframe.server import create_app

    settings = Settings.from_env(
        {},
        defaults={
            "database_url": database_url,
            "webhook_secret": Secret(SECRET),
            "data_dir": data_dir,
            "checkout": data_dir,
            "log_level": "WARNING",
        },
    )
    return create_app(settings)


async def serve(impl: str, database_url: str, data_dir: Path) -> None:
    import logging

    # Per-delivery log lines (e.g. "no Redis for the lifecycle") would swamp the output.
    logging.basicConfig(level=logging.ERROR)
    if impl == "bare":
        app = bare_app()
    elif impl == "naive":
        app = naive_app(database_url)
    else:
        app = steelframe_app(database_url, data_dir)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"url: http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


@contextlib.asynccontextmanager
async def server_process(impl: str, database_url: str, data_dir: Path) -> AsyncIterator[Any]:
    """A server in a child process; yields (process, url). The caller may kill it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.webhooks",
        "serve",
        "--impl",
        impl,
        "--database-url",
        database_url,
        "--data-dir",
        str(data_dir),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        if not line.startswith("url: "):
            raise RuntimeError(f"the {impl} server did not start: {line!r}")
        yield process, line.split(": ", 1)[1].strip()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


# -- the load -----------------------------------------------------------------------------


def _about_issue(body: bytes, n: int) -> bytes:
    """The delivery about another issue (same size give or take a few digits)."""
    data = json.loads(body)
    data["issue"]["id"] = 10_000_000 + n
    return json.dumps(data, separators=(",", ":")).encode()


def prepare(host: str, body: bytes) -> tuple[str, bytes]:
    """(delivery id, the whole HTTP request) for one signed delivery."""
    delivery = str(uuid.uuid4())
    head = "".join(f"{k}: {v}\r\n" for k, v in headers_for(body, delivery).items())
    request = (
        f"POST /api/github/webhooks HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Length: {len(body)}\r\n{head}\r\n"
    ).encode() + body
    return delivery, request


class Connection:
    """A minimal keep-alive HTTP/1.1 client on asyncio streams: the load generator must
    not be the bottleneck (aiohttp's client costs more per request than a lean server)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self, request: bytes) -> int:
        """Send one prepared request; the answer's status."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(request)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return int(status_line.split()[1])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def blast(
    url: str,
    body: bytes,
    *,
    requests: int,
    concurrency: int,
    rate: float | None = None,
    acked: list[str] | None = None,
) -> tuple[float, list[float], int]:
    """Send `requests` deliveries from `concurrency` clients: (seconds, latencies, errors).

    Without `rate`, each client sends its next delivery when the last is answered (the
    saturation rate). With `rate`, delivery n is due at start + n/rate and its latency is
    counted from when it was due, so a stalled server cannot hide its stall (no
    coordinated omission). Acknowledged ids are appended to `acked` as answers arrive."""
    host, port = url.removeprefix("http://").split(":")
    # Signed and serialised up front: the clients only write bytes and read answers.
    # Each about an issue of its own: the same body again would be a replay (issue 35),
    # stored and never processed.
    prepared = [prepare(host, _about_issue(body, n)) for n in range(requests)]
    deliveries = iter(range(requests))
    latencies: list[float] = []
    errors = 0

    async def client() -> None:
        nonlocal errors
        connection = Connection(host, int(port))
        try:
            for n in deliveries:
                delivery, request = prepared[n]
                started = time.perf_counter()
                if rate is not None:
                    due = begun + n / rate
                    if due > started:
                        await asyncio.sleep(due - started)
                    started = due
                try:
                    ok = await connection.send(request) == 202
                except (OSError, ValueError, asyncio.IncompleteReadError):
                    ok = False
                    connection.close()
                    connection = Connection(host, int(port))
                if ok:
                    latencies.append(time.perf_counter() - started)
                    if acked is not None:
                        acked.append(delivery)
                else:
                    errors += 1
        finally:
            connection.close()

    begun = time.perf_counter()
    await asyncio.gather(*[client() for _ in range(concurrency)])
    return time.perf_counter() - begun, latencies, errors


@contextlib.contextmanager
def database(kind: str, scratch: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{scratch / f'bench-{uuid.uuid4().hex[:6]}.db'}"
        return
    from sqlalchemy import create_engine, text

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    joiner = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{joiner}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


async def measure(
    impl: str,
    kind: str,
    scratch: Path,
    *,
    requests: int,
    concurrency: int,
    paced: float | None = None,
) -> list[dict[str, Any]]:
    """The saturation run, and (with `paced`) a run offered `paced` deliveries a second."""
    body = payload()
    rows = []
    with database(kind, scratch) as url:
        async with server_process(impl, url, scratch) as (_, base):
            warm = max(concurrency * 2, requests // 10)
            await blast(base, body, requests=warm, concurrency=concurrency)
            for rate in (None, paced) if paced else (None,):
                seconds, latencies, errors = await blast(
                    base, body, requests=requests, concurrency=concurrency, rate=rate
                )
                rows.append(
                    {
                        "impl": impl if rate is None else f"{impl} @{rate:.0f}/s",
                        "db": kind,
                        "rate": len(latencies) / seconds,
                        "p50": percentile(latencies, 50) * 1000,
                        "p99": percentile(latencies, 99) * 1000,
                        "errors": errors,
                    }
                )
    return rows


def report(rows: list[dict[str, Any]], *, size: int, requests: int, concurrency: int) -> None:
    print(
        f"signed issues deliveries ({size / 1024:.1f} KB), {requests} per run, "
        f"{concurrency} concurrent clients; servers in their own process"
    )
    print(
        f"  {'handler':<19} {'db':<9} {'deliveries/s':>12} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'vs naive':>9} {'errors':>7}"
    )
    for row in rows:
        naive = next((r["rate"] for r in rows if r["impl"] == "naive" and r["db"] == row["db"]), 0)
        print(
            f"  {row['impl']:<19} {row['db']:<9} {row['rate']:12.0f} {row['p50']:8.1f} "
            f"{row['p99']:8.1f} {ratio(row['rate'], naive):>9} {row['errors']:7d}"
        )
    for kind in dict.fromkeys(r["db"] for r in rows if r["db"] != "-"):
        mine = [r for r in rows if r["impl"].startswith("steelframe") and r["db"] == kind]
        naive_rate = next(r["rate"] for r in rows if r["impl"] == "naive" and r["db"] == kind)
        fast = mine[0]["rate"] >= 2 * naive_rate
        paced = mine[-1]
        print(
            f"  {kind}: saturation {ratio(mine[0]['rate'], naive_rate).strip()} naive "
            f"({'met' if fast else 'NOT met'}: >= 2x); at twice naive's rate p99 "
            f"{paced['p99']:.1f} ms ({'met' if paced['p99'] <= 50 else 'NOT met'}: <= 50 ms)"
        )


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    kinds = [k for k in args.db.split(",") if k]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-webhooks-") as tmp:
        scratch = Path(tmp)
        bare = await measure(
            "bare", "sqlite", scratch, requests=args.requests, concurrency=args.concurrency
        )
        rows += [row | {"db": "-"} for row in bare]
        for kind in kinds:
            naive = await measure(
                "naive", kind, scratch, requests=args.requests, concurrency=args.concurrency
            )
            rows += naive
            rows += await measure(
                "steelframe",
                kind,
                scratch,
                requests=args.requests,
                concurrency=args.concurrency,
                paced=2 * naive[0]["rate"],
            )
    report(rows, size=len(payload()), requests=args.requests, concurrency=args.concurrency)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks")
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve", help="run one server (used by the benchmark)")
    serve_cmd.add_argument("--impl", choices=IMPLS, required=True)
    serve_cmd.add_argument("--database-url", required=True)
    serve_cmd.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--db", default="sqlite,postgres", help="comma-separated")
    parser.add_argument("--smoke", action="store_true", help="tiny run, SQLite only")
    args = parser.parse_args(argv)
    if args.command == "serve":
        asyncio.run(serve(args.impl, args.database_url, args.data_dir))
        return 0
    if args.smoke:
        args.requests, args.concurrency, args.db = 80, 8, "sqlite"
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
