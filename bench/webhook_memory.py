"""Unauthenticated memory cost: concurrent large webhook bodies with a wrong signature,
against the real service and, in the same run, the naive handler of `bench.webhooks`
(reads the whole body, then checks the signature: what the service did before it streamed
bodies through the HMAC under a budget of bytes in flight).

Each server runs in its own process; the figure is the growth of its resident memory
(peak during the flood minus before it), sampled every 5 ms.

    python -m bench.webhook_memory [--bodies 30] [--mb 24] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections import Counter
from pathlib import Path

import psutil

from bench._stats import ratio
from bench.webhooks import database, server_process

MB = 1024 * 1024


async def forged(port: int, body: bytes) -> tuple[int, str | None]:
    """One delivery signed with the wrong key, written a megabyte at a time (the client
    stays small); (status, Retry-After). The memory test uses it too."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /api/github/webhooks HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "X-GitHub-Event: issues\r\nX-GitHub-Delivery: forged\r\n"
        f"X-Hub-Signature-256: sha256={'0' * 64}\r\nConnection: close\r\n\r\n"
    )
    try:
        writer.write(head.encode())
        view = memoryview(body)
        for start in range(0, len(body), MB):  # a megabyte at a time: the client stays small
            writer.write(view[start : start + MB])
            await writer.drain()
    except ConnectionError:
        pass  # refused early and closed: the answer is still there to read
    status_line = await reader.readline()
    retry_after = None
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "retry-after":
            retry_after = value.strip()
    writer.close()
    return int(status_line.split()[1]), retry_after


async def flood(impl: str, scratch: Path, *, bodies: int, size: int) -> tuple[float, Counter[int]]:
    """(MB of resident memory the flood added at its peak, statuses)."""
    body = b'{"zen":"' + b"x" * (size - 10) + b'"}'
    with database("sqlite", scratch) as url:
        async with server_process(impl, url, scratch) as (process, base):
            port = int(base.rsplit(":", 1)[1])
            server = psutil.Process(process.pid)
            await forged(port, body[: 64 * 1024])
            before = peak = server.memory_info().rss
            done = asyncio.Event()

            async def sample() -> None:
                nonlocal peak
                while not done.is_set():
                    peak = max(peak, server.memory_info().rss)
                    await asyncio.sleep(0.005)

            sampler = asyncio.create_task(sample())
            answers = await asyncio.gather(*[forged(port, body) for _ in range(bodies)])
            statuses = [status for status, _ in answers]
            done.set()
            await sampler
    return (peak - before) / MB, Counter(statuses)


async def run(args: argparse.Namespace) -> None:
    size = int(args.mb * MB)
    with tempfile.TemporaryDirectory(prefix="bench-webhook-memory-") as tmp:
        naive, naive_codes = await flood("naive", Path(tmp), bodies=args.bodies, size=size)
        mine, my_codes = await flood("steelframe", Path(tmp), bodies=args.bodies, size=size)
    print(
        f"{args.bodies} concurrent {args.mb:g} MB bodies with a wrong signature; "
        "resident memory growth of the server process at its peak"
    )
    for name, growth, codes in (("naive", naive, naive_codes), ("steelframe", mine, my_codes)):
        answers = " ".join(f"{code}x{n}" for code, n in sorted(codes.items()))
        print(f"  {name:<11} {growth:8.0f} MB  answers {answers}")
    print(f"  steelframe vs naive: {ratio(mine, naive).strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhook_memory")
    parser.add_argument("--bodies", type=int, default=30)
    parser.add_argument("--mb", type=float, default=24.0)
    parser.add_argument("--smoke", action="store_true", help="4 bodies of 2 MB")
    args = parser.parse_args(argv)
    if args.smoke:
        args.bodies, args.mb = 4, 2.0
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
