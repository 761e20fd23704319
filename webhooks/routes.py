"""`POST /api/github/webhooks` (Probot's path): the thin HTTP side of `webhooks.receiver`.

The body is streamed through the signature check into a bounded buffer (`webhooks.body`);
a body the budget of bytes in flight cannot take is answered 503 with Retry-After before
it is read, and the connection is closed after the answer.
"""

from __future__ import annotations

from aiohttp import web

from bot.errors import error_body
from webhooks.appkeys import RECEIVER
from webhooks.body import Busy
from webhooks.receiver import Receipt

routes = web.RouteTableDef()
PATH = "/api/github/webhooks"
CHUNK = 64 * 1024


@routes.post(PATH)
async def receive_webhook(request: web.Request) -> web.Response:
    receiver = request.app[RECEIVER]
    # Refused before reading: oversized (GitHub never sends more than 25 MB), unsigned,
    # not from GitHub's hook shape, or no secret to check against.
    secret = receiver.precheck(request.headers, request.content_length)
    try:
        with receiver.reading(secret, request.content_length) as body:
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
        return web.json_response({"delivery": delivery_id, "status": "duplicate"}, status=200)
    return web.json_response({"delivery": delivery_id, "status": "accepted"}, status=202)
