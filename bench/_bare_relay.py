"""The baseline for bench/chat_streams.py: a bare aiohttp relay that answers
`POST /api/operator/chat/stream` by streaming one model completion as SSE frames, with one
shared client session (no limit on connections), no database, no memory, no prompt.

    python -m bench._bare_relay --model-url URL   # prints `url: ...`
"""

from __future__ import annotations

import argparse
import asyncio
import json

import aiohttp
from aiohttp import web


def app(model_url: str) -> web.Application:
    http: dict[str, aiohttp.ClientSession] = {}

    async def stream(request: web.Request) -> web.StreamResponse:
        message = (await request.json())["message"]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        frame_id = 1
        await response.write(b'id: 1\ndata: {"type":"status","text":"turn started"}\n\n')
        body = {
            "model": "bench",
            "stream": True,
            "messages": [{"role": "user", "content": message}],
        }
        text = []
        async with http["session"].post(f"{model_url}/chat/completions", json=body) as upstream:
            async for raw in upstream.content:
                line = raw.decode().strip()
                if not line.startswith("data: {"):
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
                if delta:
                    frame_id += 1
                    text.append(delta)
                    frame = {"id": frame_id, "type": "delta", "text": delta}
                    await response.write(f"id: {frame_id}\ndata: {json.dumps(frame)}\n\n".encode())
        done = {"id": frame_id + 1, "type": "done", "response": {"reply": "".join(text)}}
        await response.write(f"id: {frame_id + 1}\ndata: {json.dumps(done)}\n\n".encode())
        return response

    async def session(application: web.Application):  # type: ignore[no-untyped-def]
        connector = aiohttp.TCPConnector(limit=0)
        http["session"] = aiohttp.ClientSession(connector=connector)
        yield
        await http["session"].close()

    application = web.Application()
    application.cleanup_ctx.append(session)
    application.router.add_post("/api/operator/chat/stream", stream)
    return application


async def serve(model_url: str) -> None:
    runner = web.AppRunner(app(model_url), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    print(f"url: http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-url", required=True, help="the model's /v1 base URL")
    asyncio.run(serve(parser.parse_args().model_url))


if __name__ == "__main__":
    main()
