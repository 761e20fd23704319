"""1,000 operators streaming chat answers at once, beside a bare aiohttp relay in the same run.

A paced OpenAI-compatible model (bench/_paced_model.py) streams each answer as `--tokens`
chunks `--interval` seconds apart (30 tokens, 1 s: a 30-second answer). Every client is its
own operator (one turn each), posts `POST /api/operator/chat/stream` and reads to `done`.
Steelframe runs as a real `steelframe serve` process with the `openai` runtime; the baseline
(bench/_bare_relay.py) relays the same completion with one unlimited client session and no
work. Reported: request -> first frame and request -> done, errors, and the ratios; the CPU
each server used for its 1,000 streams (so the relay's cost per token, beside the bare
relay's); and, from `serve`'s own /metrics, the share of first frames it sent within 50 ms of
the request's bytes arriving (the client's figure also holds the client's own delays, which a
loaded machine makes long for the bare relay too). Each phase of a turn is printed too, with
the load generator's own loop lag.

    python -m bench.chat_streams [--streams 1000] [--tokens 30] [--interval 1.0] [--pin] [--smoke]
    python -m bench.chat_streams --redis-url URL                   # serve with Redis
    python -m bench.chat_streams --processes 2 [--redis-url URL]   # serve --processes 2
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench._stats import percentile, ratio
from bot.db import Database, upgrade
from bot.operators import create_operator
from steelframe.listening import announced_url

CLIENT_TIMEOUT_SECONDS = 120.0
FIRST_FRAME_TARGET = 0.05
METRICS_TOKEN = "bench-metrics"  # /metrics always needs its token
SERVER_CORE: int | None = None  # set by --pin
FIRST_FRAME_METRIC = "steelframe_chat_first_frame_seconds"
PROCESSES_REDIS = "redis://127.0.0.1:6379/14"


@dataclass
class Load:
    firsts: list[float]
    dones: list[float]
    model_starts: list[float]  # request -> the model's first token relayed
    finishes: list[float]  # the model's last token relayed -> done
    errors: list[str]
    cpu_seconds: float  # the server process's user + system time during the load
    client_lag: float = 0.0  # the load generator's loop lag p99 while streams opened
    served_in_target: float | None = None  # serve's share of first frames within 50 ms


@dataclass(frozen=True)
class Server:
    url: str
    process: psutil.Process

    def cpu(self) -> float:
        """User + system time of the server and its children (`serve --processes N`)."""
        total = 0.0
        for each in [self.process, *self.process.children(recursive=True)]:
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    def listening(self) -> int:
        """How many of its processes listen on its port (`--processes` children start
        after the parent has printed its URL)."""
        port = int(self.url.rsplit(":", 1)[1])
        count = 0
        for each in [self.process, *self.process.children(recursive=True)]:
            try:
                sockets = each.net_connections(kind="tcp")
            except psutil.NoSuchProcess:
                continue
            count += any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in sockets)
        return count


@contextmanager
def started(command: list[str], env: dict[str, str] | None = None) -> Iterator[Server]:
    """A child process that says where it listens (`url: ...`, or serve's JSON record in JSON
    log mode); its URL and process, stopped afterwards."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            url = announced_url(line)
            if url is not None:
                server = psutil.Process(process.pid)
                if SERVER_CORE is not None:
                    server.cpu_affinity([SERVER_CORE])
                yield Server(url, server)
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
) -> tuple[float, float, float, float] | str:
    await start.wait()
    await asyncio.sleep(delay)
    began = time.perf_counter()
    first = first_token = last_token = None
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
                now = time.perf_counter() - began
                first = first or now
                kind = json.loads(raw[6:])["type"]
                if kind == "delta":
                    first_token, last_token = first_token or now, now
                if kind == "done":
                    return first, now, first_token or now, now - (last_token or now)
                if kind == "error":
                    return "error frame"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return type(exc).__name__
    return "stream ended without done"


async def load(server: Server, tokens: list[str | None], ramp: float) -> Load:
    """Every operator opens one stream; arrivals spread evenly over `ramp` seconds (1,000
    in one second is the arrival rate), so all streams run at once for most of an answer."""
    url = server.url
    cpu_before = server.cpu()
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_SECONDS)
    connector = aiohttp.TCPConnector(limit=0)
    with no_collections():
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
            start = asyncio.Event()
            step = ramp / max(len(tokens), 1)
            clients = [
                asyncio.create_task(_one(http, url, token, start, i * step))
                for i, token in enumerate(tokens)
            ]
            await asyncio.sleep(0)
            start.set()
            lags = asyncio.create_task(_loop_lag(ramp + 3.0))
            results = await asyncio.gather(*clients)
            lag = await lags
    firsts = [r[0] for r in results if isinstance(r, tuple)]
    dones = [r[1] for r in results if isinstance(r, tuple)]
    model_starts = [r[2] for r in results if isinstance(r, tuple)]
    finishes = [r[3] for r in results if isinstance(r, tuple)]
    errors = [r for r in results if isinstance(r, str)]
    return Load(
        firsts, dones, model_starts, finishes, errors, server.cpu() - cpu_before, client_lag=lag
    )


@contextmanager
def no_collections() -> Iterator[None]:
    """No garbage collection in the load generator while it measures. With 1,000 streams'
    objects alive, one full collection took 73 ms, and every first frame in flight then
    was late by that much in the client's clock, for the server measured and the bare relay
    alike (timestamps from both sides, 2026-12-02). The garbage waits for the end."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


async def _loop_lag(seconds: float, tick: float = 0.01) -> float:
    """The load generator's own event-loop lag (p99) while streams open: a client too busy
    to read its sockets delays the first frames it measures, whatever the server does."""
    lags = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        before = time.perf_counter()
        await asyncio.sleep(tick)
        lags.append(time.perf_counter() - before - tick)
    return percentile(lags, 99)


async def served_in_target(url: str) -> float | None:
    """From serve's /metrics: the share of chat streams whose first frame it wrote within
    FIRST_FRAME_TARGET of starting to handle the request (None if it has no such metric)."""
    scrape = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{url}/metrics", headers=scrape) as response,
    ):
        text = await response.text()
    within = total = None
    for family in text_string_to_metric_families(text):
        if family.name != FIRST_FRAME_METRIC:
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket") and float(sample.labels["le"]) == FIRST_FRAME_TARGET:
                within = sample.value
            elif sample.name.endswith("_count"):
                total = sample.value
    return within / total if within is not None and total else None


def _operators(database_url: str, count: int) -> list[str | None]:
    database = Database.from_url(database_url)
    try:
        upgrade(database.engine)
        return [database.call(create_operator, f"bench-{i}")[1] for i in range(count)]
    finally:
        database.dispose()


def _until_listening(server: Server, processes: int) -> None:
    deadline = time.monotonic() + 60
    while server.listening() < processes:
        if time.monotonic() > deadline:
            raise RuntimeError(f"serve: {processes} processes did not listen within 60 s")
        time.sleep(0.2)


def run(
    streams: int,
    tokens: int,
    interval: float,
    ramp: float,
    processes: int = 1,
    redis_url: str = "",
) -> dict[str, Load]:
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
        ) as model,
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
            "OPENAI_BASE_URL": model.url,
            "OPENAI_API_KEY": "bench",
            "STEELFRAME_LOG_LEVEL": "WARNING",
            "STEELFRAME_METRICS_TOKEN": METRICS_TOKEN,
        }
        serve = [python, "-m", "steelframe.cli", "serve", "--port", "0"]
        if redis_url:  # several processes share turn slots, stops and frames through it
            env["STEELFRAME_REDIS_URL"] = redis_url
        if processes > 1:
            serve += ["--processes", str(processes)]
        relay = [python, "-m", "bench._bare_relay", "--model-url", model.url]
        with started(relay) as bare_server, started(serve, env) as steel_server:
            _until_listening(steel_server, processes)
            print(f"{streams} streams against the bare relay ...", flush=True)
            bare = asyncio.run(load(bare_server, [None] * streams, ramp))
            print(
                f"{streams} streams against steelframe serve ({processes} process"
                f"{'es' if processes > 1 else ''}) ...",
                flush=True,
            )
            steel = asyncio.run(load(steel_server, operator_tokens, ramp))
            if processes == 1:  # with more, /metrics is whichever process answers
                steel.served_in_target = asyncio.run(served_in_target(steel_server.url))
    return {"bare": bare, "steelframe": steel}


def report(
    result: dict[str, Load], streams: int, tokens: int, interval: float, ramp: float
) -> None:
    print(
        f"{streams} concurrent chat streams opened over {ramp:g} s; model: {tokens} tokens,"
        f" {interval:g} s apart ({tokens * interval - interval:g} s an answer)"
    )
    print(
        f"  {'':12} {'done p50':>10} {'done p99':>10} {'first p50':>10} {'first p99':>10}"
        f" {'errors':>7} {'cpu':>7} {'cpu/frame':>10}"
    )
    frames = streams * (tokens + 2)  # status, the tokens, done
    for name in ("bare", "steelframe"):
        run = result[name]
        print(
            f"  {name:12} {percentile(run.dones, 50):9.2f}s {percentile(run.dones, 99):9.2f}s"
            f" {percentile(run.firsts, 50) * 1000:8.1f}ms"
            f" {percentile(run.firsts, 99) * 1000:8.1f}ms"
            f" {len(run.errors):7d} {run.cpu_seconds:6.1f}s"
            f" {run.cpu_seconds / frames * 1e6:8.1f}us"
            + (f"  ({sorted(set(run.errors))[:3]})" if run.errors else "")
        )
    print(
        f"  {'':12} {'1st token p50':>14} {'p99':>8} {'last->done p50':>15} {'p99':>8}"
        f" {'client lag p99':>15}"
    )
    for name in ("bare", "steelframe"):
        run = result[name]
        print(
            f"  {name:12} {percentile(run.model_starts, 50) * 1000:12.1f}ms"
            f" {percentile(run.model_starts, 99) * 1000:6.0f}ms"
            f" {percentile(run.finishes, 50) * 1000:13.1f}ms"
            f" {percentile(run.finishes, 99) * 1000:6.0f}ms"
            f" {run.client_lag * 1000:13.1f}ms"
        )
    bare, steel = result["bare"], result["steelframe"]
    print(
        f"  ratio done p50 {ratio(percentile(steel.dones, 50), percentile(bare.dones, 50))}"
        f" (target <= 1.10x); cpu {ratio(steel.cpu_seconds, bare.cpu_seconds)};"
        f" steelframe first frame p99 {percentile(steel.firsts, 99) * 1000:.1f} ms"
        f" (target <= {FIRST_FRAME_TARGET * 1000:g} ms)"
    )
    if steel.served_in_target is not None:
        print(
            f"  serve wrote {steel.served_in_target:.1%} of first frames within"
            f" {FIRST_FRAME_TARGET * 1000:g} ms of the request's arrival (its /metrics)"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, default=1000, help="concurrent operators")
    parser.add_argument("--tokens", type=int, default=30, help="tokens per answer")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between tokens")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which they open")
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    parser.add_argument(
        "--processes", type=int, default=1, help="serve --processes N (needs --redis-url)"
    )
    parser.add_argument(
        "--redis-url", help=f"serve with Redis (with --processes 2 or more: {PROCESSES_REDIS})"
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="each server on core 1, the clients and the model on core 0 (as the webhook bench)",
    )
    args = parser.parse_args(argv)
    if args.pin:
        global SERVER_CORE
        SERVER_CORE = 1
        os.sched_setaffinity(0, {0})
    if args.smoke:
        args.streams, args.tokens, args.interval, args.ramp = 5, 3, 0.05, 0.05
    redis_url = args.redis_url or (PROCESSES_REDIS if args.processes > 1 else "")
    result = run(args.streams, args.tokens, args.interval, args.ramp, args.processes, redis_url)
    report(result, args.streams, args.tokens, args.interval, args.ramp)


if __name__ == "__main__":
    main()
