"""1,000 operators streaming chat answers at once, beside a bare aiohttp relay in the same run.

A paced OpenAI-compatible model (bench/_paced_model.py) streams each answer as `--tokens`
chunks `--interval` seconds apart (30 tokens, 1 s: a 30-second answer). Every client is its
own operator (one turn each), posts `POST /api/operator/chat/stream` and reads to `done`.
Steelframe runs as a real `steelframe serve` process with the `openai` runtime; the baseline
(bench/_bare_relay.py) relays the same completion with one unlimited client session and no
work. Reported: request -> first frame and request -> done, errors, and the ratios.

    python -m bench.chat_streams [--streams 1000] [--tokens 30] [--interval 1.0] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp

from bench._stats import percentile, ratio
from bot.db import Database, upgrade
from bot.operators import create_operator

CLIENT_TIMEOUT_SECONDS = 120.0


@contextmanager
def started(command: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """A child process that prints `url: ...`; its URL, and it is stopped afterwards."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("url: "):
                yield line.split(" ", 1)[1].strip()
                break
        else:
            raise RuntimeError(f"{command[2]} printed no url (exit {process.wait()})")
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


async def _one(
    http: aiohttp.ClientSession, url: str, token: str | None, start: asyncio.Event, delay: float
) -> tuple[float, float] | str:
    await start.wait()
    await asyncio.sleep(delay)
    began = time.perf_counter()
    first = None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with http.post(
            f"{url}/api/operator/chat/stream", json={"message": "Tell me a story"}, headers=headers
        ) as response:
            if response.status != 200:
                return f"HTTP {response.status}"
            async for raw in response.content:
                if not raw.startswith(b"data: "):
                    continue
                first = first or time.perf_counter() - began
                kind = json.loads(raw[6:])["type"]
                if kind == "done":
                    return first, time.perf_counter() - began
                if kind == "error":
                    return "error frame"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return type(exc).__name__
    return "stream ended without done"


async def load(
    url: str, tokens: list[str | None], ramp: float
) -> tuple[list[float], list[float], list[str]]:
    """Every operator opens one stream; arrivals spread evenly over `ramp` seconds (1,000
    in one second is the arrival rate), so all streams run at once for most of an answer."""
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_SECONDS)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        start = asyncio.Event()
        step = ramp / max(len(tokens), 1)
        clients = [
            asyncio.create_task(_one(http, url, token, start, i * step))
            for i, token in enumerate(tokens)
        ]
        await asyncio.sleep(0)
        start.set()
        results = await asyncio.gather(*clients)
    firsts = [r[0] for r in results if isinstance(r, tuple)]
    dones = [r[1] for r in results if isinstance(r, tuple)]
    errors = [r for r in results if isinstance(r, str)]
    return firsts, dones, errors


def _operators(database_url: str, count: int) -> list[str | None]:
    database = Database.from_url(database_url)
    try:
        upgrade(database.engine)
        return [database.call(create_operator, f"bench-{i}")[1] for i in range(count)]
    finally:
        database.dispose()


def run(streams: int, tokens: int, interval: float, ramp: float) -> dict[str, Any]:
    python = sys.executable
    with (
        tempfile.TemporaryDirectory() as tmp,
        started(
            [
                python,
                "-m",
                "bench._paced_model",
                "--tokens",
                str(tokens),
                "--interval",
                str(interval),
            ]
        ) as model_url,
    ):
        database_url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        print(f"creating {streams} operators ...", flush=True)
        operator_tokens = _operators(database_url, streams)
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
        env |= {
            "STEELFRAME_DATABASE_URL": database_url,
            "STEELFRAME_DATA_DIR": str(Path(tmp) / "var"),
            "STEELFRAME_CHECKOUT": tmp,
            "STEELFRAME_RUNTIME": "openai",
            "STEELFRAME_MODEL": "bench",
            "STEELFRAME_TOOL_ROUNDS": "0",
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "bench",
            "STEELFRAME_LOG_LEVEL": "WARNING",
        }
        serve = [python, "-m", "steelframe.cli", "serve", "--port", "0"]
        relay = [python, "-m", "bench._bare_relay", "--model-url", model_url]
        with started(relay) as bare_url, started(serve, env) as steel_url:
            print(f"{streams} streams against the bare relay ...", flush=True)
            bare = asyncio.run(load(bare_url, [None] * streams, ramp))
            print(f"{streams} streams against steelframe serve ...", flush=True)
            steel = asyncio.run(load(steel_url, operator_tokens, ramp))
    return {"bare": bare, "steelframe": steel}


def report(result: dict[str, Any], streams: int, tokens: int, interval: float, ramp: float) -> None:
    print(
        f"{streams} concurrent chat streams opened over {ramp:g} s; model: {tokens} tokens,"
        f" {interval:g} s apart ({tokens * interval - interval:g} s an answer)"
    )
    print(f"  {'':12} {'done p50':>10} {'done p99':>10} {'first p99':>10} {'errors':>7}")
    for name in ("bare", "steelframe"):
        firsts, dones, errors = result[name]
        print(
            f"  {name:12} {percentile(dones, 50):9.2f}s {percentile(dones, 99):9.2f}s"
            f" {percentile(firsts, 99) * 1000:8.1f}ms {len(errors):7d}"
            + (f"  ({sorted(set(errors))[:3]})" if errors else "")
        )
    (_, bare_done, _), (steel_first, steel_done, _) = result["bare"], result["steelframe"]
    print(
        f"  ratio done p50 {ratio(percentile(steel_done, 50), percentile(bare_done, 50))}"
        f" (target <= 1.10x); steelframe first frame p99"
        f" {percentile(steel_first, 99) * 1000:.1f} ms (target <= 50 ms)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, default=1000, help="concurrent operators")
    parser.add_argument("--tokens", type=int, default=30, help="tokens per answer")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between tokens")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which they open")
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    args = parser.parse_args(argv)
    if args.smoke:
        args.streams, args.tokens, args.interval, args.ramp = 5, 3, 0.05, 0.05
    result = run(args.streams, args.tokens, args.interval, args.ramp)
    report(result, args.streams, args.tokens, args.interval, args.ramp)


if __name__ == "__main__":
    main()
