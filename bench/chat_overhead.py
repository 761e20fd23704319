"""Chat overhead with the offline runtime, beside a bare aiohttp handler in the same run.

Measures (a) request -> first `status` frame and request -> `done` on the SSE endpoint and
(b) requests per second of the blocking endpoint, for Steelframe's real app (SQLite, auth,
session resolution, prompt building, trailer parsing, persistence) and for a bare aiohttp
handler that answers the same shapes with no work. Ratios are Steelframe / bare.

    python -m bench.chat_overhead [--requests N] [--concurrency C] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench._stats import percentile, ratio, summary_ms
from bot.config import Settings
from bot.operators import create_operator
from steelframe.parts import PARTS
from steelframe.server import create_app


def bare_app() -> web.Application:
    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'id: 1\ndata: {"type":"status","text":"turn started"}\n\n')
        await response.write(b'id: 2\ndata: {"type":"done","response":{"reply":"ok"}}\n\n')
        return response

    async def blocking(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"reply": "ok"})

    app = web.Application()
    app.router.add_post("/api/operator/chat/stream", stream)
    app.router.add_post("/api/operator/chat", blocking)
    return app


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


async def _stream_once(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str]
) -> tuple[float, float]:
    started = time.perf_counter()
    first = done = 0.0
    async with http.post(
        f"{url}/api/operator/chat/stream", json={"message": "How is the build?"}, headers=headers
    ) as response:
        async for raw in response.content:
            if not raw.startswith(b"data: "):
                continue
            frame = json.loads(raw[6:])
            if frame["type"] == "status" and not first:
                first = time.perf_counter() - started
            if frame["type"] in ("done", "error"):
                done = time.perf_counter() - started
                break
    return first, done


async def _latencies(
    url: str, headers: dict[str, str], requests: int
) -> tuple[list[float], list[float]]:
    firsts: list[float] = []
    dones: list[float] = []
    async with aiohttp.ClientSession() as http:
        for _ in range(requests):
            first, done = await _stream_once(http, url, headers)
            firsts.append(first)
            dones.append(done)
    return firsts, dones


async def _throughput(url: str, tokens: list[str], requests: int) -> float:
    """Blocking requests per second; one client per operator (one turn in flight each)."""
    per_client = max(1, requests // len(tokens))
    async with aiohttp.ClientSession() as http:

        async def client(token: str) -> None:
            headers = {"Authorization": f"Bearer {token}"}
            for _ in range(per_client):
                async with http.post(
                    f"{url}/api/operator/chat", json={"message": "Status?"}, headers=headers
                ) as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"blocking chat answered {response.status}")

        started = time.perf_counter()
        await asyncio.gather(*(client(token) for token in tokens))
        elapsed = time.perf_counter() - started
    return per_client * len(tokens) / elapsed


async def run(requests: int, concurrency: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(
            {},
            defaults={
                "database_url": f"sqlite:///{Path(tmp) / 'bench.db'}",
                "data_dir": Path(tmp) / "var",
                "checkout": Path(tmp),
            },
        )
        app = create_app(settings)
        steelframe, steel_url = await _serve(app)  # its parts are built as it starts
        services = app[PARTS]
        tokens = [services.db.call(create_operator, f"bench-{i}")[1] for i in range(concurrency)]
        bare, bare_url = await _serve(bare_app())
        try:
            headers = {"Authorization": f"Bearer {tokens[0]}"}
            await _latencies(steel_url, headers, 3)  # warm up both
            await _latencies(bare_url, {}, 3)
            # CPU time of this process (server, client, every thread) per streamed turn: on a
            # shared machine the latencies move with the load, the CPU a turn costs much less.
            started = time.process_time()
            sf_first, sf_done = await _latencies(steel_url, headers, requests)
            sf_cpu = (time.process_time() - started) / requests
            started = time.process_time()
            bare_first, bare_done = await _latencies(bare_url, {}, requests)
            bare_cpu = (time.process_time() - started) / requests
            sf_rps = await _throughput(steel_url, tokens, requests)
            bare_rps = await _throughput(bare_url, tokens, requests)
        finally:
            await steelframe.cleanup()
            await bare.cleanup()
    return {
        "first_status": (sf_first, bare_first),
        "done": (sf_done, bare_done),
        "rps": (sf_rps, bare_rps),
        "cpu": (sf_cpu, bare_cpu),
    }


def report(result: dict[str, Any], requests: int, concurrency: int) -> None:
    print(
        f"chat overhead, offline runtime, {requests} requests,"
        f" {concurrency} concurrent clients for rps"
    )
    for label, key in (("request -> first status", "first_status"), ("request -> done", "done")):
        steel, bare = result[key]
        print(f"  {label:24} steelframe {summary_ms(steel)}")
        print(f"  {'':24} bare       {summary_ms(bare)}")
        print(f"  {'':24} ratio p50 {ratio(percentile(steel, 50), percentile(bare, 50))}")
    steel_cpu, bare_cpu = result["cpu"]
    print(
        f"  CPU per streamed turn    steelframe {steel_cpu * 1000:7.2f} ms"
        f"  bare {bare_cpu * 1000:7.2f} ms  ratio {ratio(steel_cpu, bare_cpu)}"
        "  (this process: server, client, every thread)"
    )
    steel_rps, bare_rps = result["rps"]
    print(
        f"  blocking rps             steelframe {steel_rps:8.1f}/s  bare {bare_rps:8.1f}/s"
        f"  ratio {ratio(steel_rps, bare_rps)}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    args = parser.parse_args(argv)
    requests = 5 if args.smoke else args.requests
    concurrency = 2 if args.smoke else args.concurrency
    result = asyncio.run(run(requests, concurrency))
    report(result, requests, concurrency)
    # The same overhead through a real model protocol: the openai runtime against a local
    # server streaming 1,000 tokens (issue 7).
    from bench import runtime_overhead

    runtime_overhead.main(["--smoke"] if args.smoke else [])


if __name__ == "__main__":
    main()
