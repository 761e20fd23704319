"""New connections to a model, on the loop `serve` runs (steelframe.event_loop.ServeLoop)
beside uvloop's own in the same run.

Each chat turn's model call opens its connection through aiohttp, which connects sockets
with `loop.sock_connect` to addresses already resolved; uvloop resolved them again on its
thread pool. The paced model (bench/_paced_model.py, one token) runs as its own process;
this process opens `--connections` connections, a few dozen at once, each a streamed
completion read to its end on a connection of its own (as 1,000 operators starting turns
at once make them). Reported: this process's CPU per connection (every thread's: libuv's
resolver threads too) and wall time per connection, best of three interleaved rounds.

    python -m bench.connects [--connections 2000] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import aiohttp

from bench._stats import ratio
from bench.chat_streams import started
from steelframe.event_loop import ServeLoop, uvloop

AT_ONCE = 32
BODY = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


async def connections(url: str, count: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per connection for `count` completions, each on a new
    connection (the connector keeps none: `force_close`)."""
    connector = aiohttp.TCPConnector(limit=AT_ONCE, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def one() -> None:
            async with http.post(f"{url}/chat/completions", json=BODY) as response:
                await response.read()

        await asyncio.gather(*(one() for _ in range(AT_ONCE)))  # warm: imports, caches
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        return (time.process_time() - cpu) / count, (time.perf_counter() - wall) / count


def measure(url: str, count: int) -> dict[str, tuple[float, float]]:
    loops = {"uvloop": uvloop.Loop, "serve's loop": ServeLoop}
    best: dict[str, tuple[float, float]] = {}
    for _ in range(3):  # interleaved, best of three: the machine's noise moves both alike
        for name, factory in loops.items():
            with asyncio.Runner(loop_factory=factory) as runner:
                cpu, wall = runner.run(connections(url, count))
            previous = best.get(name, (cpu, wall))
            best[name] = (min(cpu, previous[0]), min(wall, previous[1]))
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000, help="per round and loop")
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    args = parser.parse_args(argv)
    if uvloop is None:
        print("uvloop is not installed: serve runs asyncio's loop, nothing to compare")
        return
    count = 50 if args.smoke else args.connections
    model = [sys.executable, "-m", "bench._paced_model", "--tokens", "1", "--interval", "0"]
    with started(model) as server:
        best = measure(server.url, count)
    print(f"{count} model calls, each on a new connection ({AT_ONCE} at once)")
    for name, (cpu, wall) in best.items():
        print(f"  {name:13} cpu {cpu * 1e6:7.1f} us  wall {wall * 1e6:7.1f} us per connection")
    (ours_cpu, ours_wall), (base_cpu, base_wall) = best["serve's loop"], best["uvloop"]
    print(f"  ratio cpu {ratio(ours_cpu, base_cpu)}  wall {ratio(ours_wall, base_wall)}")


if __name__ == "__main__":
    main()
