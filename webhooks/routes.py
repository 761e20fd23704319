"""`POST /api/github/webhooks` (Probot's path): the thin HTTP side of `webhooks.receiver`.

The body is streamed through the signature check into a bounded buffer (`webhooks.body`);
a body the budget of bytes in flight cannot take is answered 503 with Retry-After before
it is read, and the connection is closed after the answer.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from bot.errors import error_body
from webhooks.appkeys import RECEIVER
from webhooks.body import Busy
from webhooks.receiver import Receipt, Receiver

routes = web.RouteTableDef()
PATH = "/api/github/webhooks"
CHUNK = 64 * 1024


@routes.post(PATH)
async def receive_webhook(request: web.Request) -> web.Response:
    return await receive(request.app[RECEIVER], request)


async def receive(receiver: Receiver, request: web.Request) -> web.Response:
    """The delivery's answer; served directly (`direct_handler`) or through the router."""
    # Refused before reading: oversized (GitHub never sends more than 25 MB), unsigned,
    # not from GitHub's hook shape, or no secret to check against.
    length = request.content_length
    secret = receiver.precheck(request.headers, length)
    try:
        with receiver.reading(secret, length) as body:
            if length is not None and length <= CHUNK:
                # Most deliveries: one read of what is already buffered, no copy of it.
                body.feed_all(await _read_exactly(request, length))
            else:
                async for chunk in request.content.iter_chunked(CHUNK):
                    body.feed(chunk)
            verified = body.verified(request.headers.get("X-Hub-Signature-256"))
            receipt, delivery_id = await receiver.accept(request.headers, verified)
    except Busy as exc:
        response = web.json_response(
            error_body(exc.message, exc.detail, code=exc.code),
            status=exc.status,
            headers={"Retry-After": str(exc.retry_after)},
        )
        response.force_close()  # the unread body is not worth a kept-alive connection
        return response
    if receipt is Receipt.DUPLICATE:
        return _acknowledgement(delivery_id, "duplicate", 200)
    return _acknowledgement(delivery_id, "accepted", 202)


async def _read_exactly(request: web.Request, length: int) -> bytes:
    try:
        return await request.content.readexactly(length)
    except asyncio.IncompleteReadError as exc:  # sent less than declared: will not verify
        return exc.partial


def direct_handler(receiver: Receiver) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler the server may call before routing (`bot.appkeys.DIRECT_ROUTES`): it
    carries its receiver, since `request.app` is set only by aiohttp's router."""
    return functools.partial(receive, receiver)


def _acknowledgement(delivery_id: str, status: str, code: int) -> web.Response:
    # orjson, not json_response's json.dumps: the answer to every delivery is on the hot path.
    body = orjson.dumps({"delivery": delivery_id, "status": status})
    return web.Response(body=body, status=code, headers=_JSON)


_JSON = {"Content-Type": "application/json; charset=utf-8"}
