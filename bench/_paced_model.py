"""A paced OpenAI-compatible model for benchmarks: every chat completion streams `--tokens`
chunks, `--interval` seconds apart, in the real wire format, then `[DONE]`.

    python -m bench._paced_model --tokens 30 --interval 1.0   # prints `url: ...`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from aiohttp import web


def app(tokens: int, interval: float) -> web.Application:
    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        envelope = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "bench"),
            "system_fingerprint": "fp_bench",
        }
        for index in range(tokens):
            if index:
                await asyncio.sleep(interval)
            delta = (
                {"role": "assistant", "content": f"w{index} "}
                if index == 0
                else {"content": f"w{index} "}
            )
            chunk = {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        last = {**envelope, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await response.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
        return response

    application = web.Application()
    application.router.add_post("/v1/chat/completions", completions)
    return application


async def serve(tokens: int, interval: float, port: int) -> None:
    runner = web.AppRunner(app(tokens, interval), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    print(f"url: http://127.0.0.1:{runner.addresses[0][1]}/v1", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=30, help="chunks per completion")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between chunks")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()
    asyncio.run(serve(args.tokens, args.interval, args.port))


if __name__ == "__main__":
    main()
