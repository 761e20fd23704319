"""`POST /api/github/webhooks` (Probot's path): the thin HTTP side of `webhooks.receiver`."""

from __future__ import annotations

from aiohttp import web

from webhooks.appkeys import RECEIVER
from webhooks.receiver import Receipt

routes = web.RouteTableDef()
PATH = "/api/github/webhooks"


@routes.post(PATH)
async def receive_webhook(request: web.Request) -> web.Response:
    receiver = request.app[RECEIVER]
    # Refuse an oversized body before reading it (GitHub never sends more than 25 MB).
    receiver.check_size(request.content_length)
    body = await request.read()
    receipt, delivery_id = await receiver.receive(request.headers, body)
    if receipt is Receipt.DUPLICATE:
        return web.json_response({"delivery": delivery_id, "status": "duplicate"}, status=200)
    return web.json_response({"delivery": delivery_id, "status": "accepted"}, status=202)
