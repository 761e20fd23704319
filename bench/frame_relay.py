"""The chat frame relay's cost on the event loop (`bot/chat/frame_outbox.py`), beside the plain way
of writing the same frames in the same run: a pipeline per batch with XADD and PEXPIRE for
each frame (what the relay sent before it wrote a batch with one script call).

`size` turns publish a frame at once, so the relay's flusher finds batches of that size;
reported is this process's CPU time per frame (the loop's share of relaying, Redis's own
work aside) for batches of 1, 4, 32 and 1,000 frames.

    python -m bench.frame_relay [--redis-url URL] [--frames N] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import redis.asyncio as aioredis

from bot.chat.frame_outbox import FrameOutbox, _Outgoing
from bot.chat.frames import MAX_FRAMES, PREFIX, NumberedFrame
from bot.contracts.chat import DeltaFrame

SIZES = (1, 4, 32, 1000)
FRAME = DeltaFrame(text="a token or two", draft=1)


class PipelinedOutbox(FrameOutbox):
    """The baseline: the same outbox and flusher, each batch written as pipelined commands."""

    async def _append(self, batch: list[_Outgoing], streams: list[str], texts: list[bytes]) -> None:
        async with self._writer.pipeline(transaction=False) as pipe:
            for stream, text in zip(streams, texts, strict=True):
                pipe.xadd(stream, {"f": text}, maxlen=MAX_FRAMES, approximate=True)
            for stream in set(streams):
                pipe.pexpire(stream, self._linger_ms)
            await pipe.execute()


async def cpu_per_frame(relay: FrameOutbox, size: int, frames: int) -> float:
    async def batch() -> None:
        await asyncio.gather(
            # numbered (and so encoded) per frame, as a turn does before it publishes
            *(relay.publish(n, f"bench-{n}", "s", NumberedFrame.of(12, FRAME)) for n in range(size))
        )

    for _ in range(max(3, 100 // size)):  # connections made, script loaded
        await batch()
    rounds = max(frames // size, 3)
    started = time.process_time()
    for _ in range(rounds):
        await batch()
    return (time.process_time() - started) / (rounds * size)


async def measure(redis_url: str, frames: int) -> list[tuple[int, float, float]]:
    rows = []
    relay, pipelined = FrameOutbox(redis_url, linger=60), PipelinedOutbox(redis_url, linger=60)
    try:
        for size in SIZES:
            # Interleaved, best of three each: the machine's noise moves both alike.
            ours = min([await cpu_per_frame(relay, size, frames) for _ in range(3)])
            plain = min([await cpu_per_frame(pipelined, size, frames) for _ in range(3)])
            rows.append((size, ours, plain))
    finally:
        await relay.close()
        await pipelined.close()
        await _forget(redis_url)
    return rows


async def _forget(redis_url: str) -> None:
    client: Any = aioredis.Redis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{PREFIX}*bench-*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--frames", type=int, default=20_000, help="frames per measurement")
    parser.add_argument("--smoke", action="store_true", help="tiny run for the test suite")
    args = parser.parse_args(argv)
    frames = 50 if args.smoke else args.frames
    rows = asyncio.run(measure(args.redis_url, frames))
    print(f"frame relay through Redis: CPU of the publishing process per frame ({frames} frames)")
    for size, ours, plain in rows:
        print(
            f"  batches of {size:5}  relay {ours * 1e6:7.1f} us  pipelined {plain * 1e6:7.1f} us"
            f"  ratio {ours / plain:.2f}x"
        )


if __name__ == "__main__":
    main()
