"""The `openai` runtime's overhead on a long stream, beside a bare SSE reader and the server.

A local fake OpenAI-compatible server (tests/fakes/openai_server.py, the real wire format)
streams N one-token chunks. Each run reads the same stream twice: through Steelframe's
`OpenAIRuntime` (budgeting, SSE parsing, think-tag splitting, events) and through a bare
aiohttp reader that only splits `data:` lines and decodes the JSON. Ratios are Steelframe /
bare. Three shapes:

- first frame: request -> first token of a short answer, for the runtime with a client
  session kept across turns (as the service can pass one), with a session (and so a new
  connection) per turn, and for the bare reader on a kept-alive connection.
- paced: one token per `--interval` ms (faster than any real model), so every token is read
  before the next is written. The server stamps each write (same process, same clock), so
  latency per token is "client got token i" minus "server wrote token i".
- burst: the server writes all N tokens as fast as it can; the added time to read them all,
  divided by N, is the per-token cost of Steelframe's parsing.

    python -m bench.runtime_overhead [--tokens N] [--runs R] [--interval MS] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from bench._stats import percentile, ratio
from bot.config_values import Secret
from bot.runtimes.base import ChatMessage, Delta, RuntimeRequest, TurnFacts
from bot.runtimes.openai import OpenAIRuntime
from bot.runtimes.transport import Endpoint
from tests.fakes.openai_server import (
    Content,
    Done,
    FakeOpenAI,
    Finish,
    Pause,
    Step,
    UsageStep,
    running,
)

MODEL = "bench-model"
KEY = "sk-bench-0000000000"
PROMPT = "Say a thousand words."


@dataclass
class Run:
    first_frame: float  # request start -> first token in the client's hands
    per_token: float  # mean of (client got token i - server wrote token i)
    total: float  # request start -> last token in the client's hands
    server_first: float  # request start -> server wrote the first token
    server_stream: float  # server: first token written -> last token written


def script(tokens: int, interval: float) -> list[Step]:
    steps: list[Step] = []
    for number in range(tokens):
        if interval:
            steps.append(Pause(interval))
        steps.append(Content(f"tok{number} "))
    return [*steps, Finish(), UsageStep(tokens, tokens), Done()]


async def steelframe_run(
    base: str,
    fake: FakeOpenAI,
    tokens: int,
    interval: float,
    checkout: Path,
    http: aiohttp.ClientSession | None,
) -> Run:
    fake.enqueue(MODEL, script(tokens, interval))
    runtime = OpenAIRuntime(
        model=MODEL,
        endpoint=Endpoint(base_url=base, api_key=Secret(KEY)),
        context_tokens=32_000,
        tool_rounds=0,
        http=http,
    )
    request = RuntimeRequest(
        system="You are Steelframe.",
        messages=[ChatMessage(role="user", content=PROMPT)],
        facts=TurnFacts(message=PROMPT),
        checkout=checkout,
    )
    started = time.perf_counter()
    arrivals: list[float] = []
    async for event in runtime.stream(request):
        if isinstance(event, Delta):
            arrivals.append(time.perf_counter())
    return _measure(fake, started, arrivals, tokens)


async def bare_run(
    base: str, fake: FakeOpenAI, tokens: int, interval: float, http: aiohttp.ClientSession
) -> Run:
    fake.enqueue(MODEL, script(tokens, interval))
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.perf_counter()
    arrivals: list[float] = []
    headers = {"Authorization": f"Bearer {KEY}"}
    async with http.post(f"{base}/chat/completions", json=body, headers=headers) as response:
        async for line in response.content:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or ():
                if choice["delta"].get("content"):
                    arrivals.append(time.perf_counter())
    return _measure(fake, started, arrivals, tokens)


def _measure(fake: FakeOpenAI, started: float, arrivals: list[float], tokens: int) -> Run:
    if len(arrivals) != tokens:
        raise RuntimeError(f"expected {tokens} tokens, got {len(arrivals)}")
    writes = fake.requests[-1].writes[1 : tokens + 1]  # [0] is the role chunk
    lags = [got - wrote for got, wrote in zip(arrivals, writes, strict=True)]
    return Run(
        first_frame=arrivals[0] - started,
        per_token=statistics.fmean(lags),
        total=arrivals[-1] - started,
        server_first=writes[0] - started,
        server_stream=writes[-1] - writes[0],
    )


Series = dict[str, list[Run]]


async def run(tokens: int, runs: int, interval: float, *, per_turn: bool = False) -> Series:
    """Runs by client, interleaved so drift hits all alike. `per_turn` adds the runtime
    with a client session (a new connection) per turn."""
    fake = FakeOpenAI(api_key=KEY)
    series: Series = {"steelframe": [], "per-turn": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        checkout = Path(tmp)
        async with running(fake.app()) as url, aiohttp.ClientSession() as http:
            base = f"{url}/v1"
            await steelframe_run(base, fake, 10, 0.0, checkout, http)  # warm up every path
            await steelframe_run(base, fake, 10, 0.0, checkout, None)
            await bare_run(base, fake, 10, 0.0, http)
            for _ in range(runs):
                run = await steelframe_run(base, fake, tokens, interval, checkout, http)
                series["steelframe"].append(run)
                if per_turn:
                    run = await steelframe_run(base, fake, tokens, interval, checkout, None)
                    series["per-turn"].append(run)
                series["bare"].append(await bare_run(base, fake, tokens, interval, http))
    return series


def _p50(runs: list[Run], name: str) -> float:
    return percentile([getattr(r, name) for r in runs], 50)


def _compare(
    label: str, series: Series, name: str, scale: float, unit: str, *, who: str = "steelframe"
) -> None:
    s, b = _p50(series[who], name), _p50(series["bare"], name)
    print(
        f"  {label:26} steelframe {s * scale:8.2f} {unit}  bare {b * scale:8.2f} {unit}"
        f"  added {(s - b) * scale:+8.2f} {unit}  ratio {ratio(s, b)}"
    )


def report(first: Series, paced: Series, burst: Series, tokens: int, interval: float) -> None:
    print(f"openai runtime overhead against a local fake server (p50 of {len(paced['bare'])} runs)")
    print(f"  first frame, short answers, p50 of {len(first['bare'])}")
    server = _p50(first["steelframe"], "server_first") * 1000
    print(f"  {'fake server itself':26} first token written {server:7.2f} ms after the request")
    _compare("kept-alive session", first, "first_frame", 1000, "ms")
    _compare("new session per turn", first, "first_frame", 1000, "ms", who="per-turn")
    print(f"  paced: {tokens} tokens, one per {interval * 1000:g} ms")
    stream = _p50(paced["steelframe"], "server_stream") * 1000
    print(f"  {'fake server itself':26} wrote all {tokens} in {stream:.1f} ms")
    _compare("request -> first frame", paced, "first_frame", 1000, "ms")
    _compare("latency per token", paced, "per_token", 1e6, "us")
    print(f"  burst: {tokens} tokens written as fast as the server can")
    stream = _p50(burst["steelframe"], "server_stream")
    per_write = stream / max(1, tokens - 1) * 1e6
    print(
        f"  {'fake server itself':26} wrote all in {stream * 1000:.2f} ms"
        f" ({per_write:.1f} us/token)"
    )
    _compare("request -> last token", burst, "total", 1000, "ms")
    added = (_p50(burst["steelframe"], "total") - _p50(burst["bare"], "total")) / tokens
    print(f"  {'added per token':26} {added * 1e6:+8.2f} us")


# Run as part of bench.chat_overhead; `make bench` does not run it a second time.
STANDALONE = False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0, help="ms between paced tokens")
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    args = parser.parse_args(argv)
    tokens = 50 if args.smoke else args.tokens
    runs = 1 if args.smoke else args.runs
    interval = args.interval / 1000
    first = asyncio.run(run(5, 3 if args.smoke else 30, 0.0, per_turn=True))
    paced = asyncio.run(run(tokens, runs, interval))
    burst = asyncio.run(run(tokens, runs, 0.0))
    report(first, paced, burst, tokens, interval)


if __name__ == "__main__":
    main()
