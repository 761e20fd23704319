"""`POST /api/github/webhooks` (Probot's path): the thin HTTP side of `webhooks.receiver`.

The body is streamed through the signature check into a bounded buffer (`webhooks.body`),
as aiohttp decodes it when it has a Content-Encoding; a body the budget of bytes in flight
cannot take is answered 503 with Retry-After before it is read, and the connection is
closed after the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import orjson
from aiohttp import web
from aiohttp.hdrs import CONTENT_ENCODING

from bot.errors import RequestTimeout, error_body
from webhooks.body import Busy, SignedBody
from webhooks.deps import WEBHOOKS
from webhooks.receiver import Receipt, Receiver

routes = web.RouteTableDef()
PATH = "/api/github/webhooks"
CHUNK = 64 * 1024
BODY_STALL_SECONDS = 30.0  # as a fast lane's BODY_IDLE_SECONDS and the operator API's bodies


@routes.post(PATH)
async def receive_webhook(request: web.Request) -> web.Response:
    return await receive(request.app[WEBHOOKS].receiver, request)


async def receive(receiver: Receiver, request: web.Request) -> web.Response:
    """The delivery's answer; served directly (`direct_handler`) or through the router."""
    # Refused before reading: oversized (GitHub never sends more than 25 MB), unsigned,
    # not from GitHub's hook shape, or no secret to check against.
    length = request.content_length
    secret = receiver.precheck(request.headers, length)
    if CONTENT_ENCODING in request.headers:
        # aiohttp decodes the body as its Content-Encoding says (a body that does not decode
        # is a 400: http_edge.errors) and the signature is checked on what it decodes to;
        # the declared length is the encoded one, so the decoded body is read to its end
        # (within max_body). GitHub never encodes; a fast lane hands such a request here.
        length = None
    try:
        with receiver.reading(secret, length) as body:
            if length is not None and length <= CHUNK:
                # Most deliveries: one read of what is already buffered, no copy of it.
                body.feed_all(await _read_exactly(request, length))
            else:
                async for chunk in _chunks(request):
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
    status, answer = acknowledgement(receipt, delivery_id)
    return web.Response(body=answer, status=status, headers=_JSON)


async def _read_exactly(request: web.Request, length: int) -> bytes:
    try:
        async with _stall_limit():
            return await request.content.readexactly(length)
    except asyncio.IncompleteReadError as exc:  # sent less than declared: will not verify
        return exc.partial


async def _chunks(request: web.Request) -> AsyncIterator[bytes]:
    """The body as it arrives, each read within BODY_STALL_SECONDS."""
    while True:
        async with _stall_limit():
            chunk = await request.content.readany()
        if not chunk:
            return
        yield chunk


@contextlib.asynccontextmanager
async def _stall_limit() -> AsyncIterator[None]:
    """A read that waits longer than BODY_STALL_SECONDS is a 408: a client trickling a
    large declared body would otherwise hold its share of the bytes-in-flight budget."""
    try:
        async with asyncio.timeout(BODY_STALL_SECONDS):
            yield
    except TimeoutError:
        raise RequestTimeout(
            f"the webhook body stopped arriving for {BODY_STALL_SECONDS:g} s"
        ) from None


def direct_handler(receiver: Receiver) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler the server may call before routing (`http_edge.appkeys.DIRECT_ROUTES`): it
    carries its receiver, since `request.app` is set only by aiohttp's router."""
    return functools.partial(receive, receiver)


def acknowledgement(receipt: Receipt, delivery_id: str) -> tuple[int, bytes]:
    """The status and JSON body that acknowledge a stored delivery."""
    # orjson, not json_response's json.dumps: the answer to every delivery is on the hot path.
    body = orjson.dumps({"delivery": delivery_id, "status": receipt.value})
    # A replay is answered as a new delivery would be: stored, and it changes nothing.
    return (200 if receipt is Receipt.DUPLICATE else 202), body


_JSON = {"Content-Type": "application/json; charset=utf-8"}


class WebhookLane:
    """This route on a fast lane (`steelframe.lanes`, declared in `http_edge.appkeys.LANE_ROUTES`):
    the same receiver, fed by the lane's own HTTP instead of aiohttp's request objects."""

    request_line = f"POST {PATH} HTTP/1.1".encode("ascii")
    path = PATH

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver

    def begin(self, headers: Mapping[str, str], content_length: int) -> LaneDelivery:
        secret = self.receiver.precheck(headers, content_length)
        return LaneDelivery(self.receiver, headers, self.receiver.reading(secret, content_length))


class LaneDelivery:
    """One delivery on the lane: its body through the signature check, then stored."""

    def __init__(self, receiver: Receiver, headers: Mapping[str, str], body: SignedBody) -> None:
        self._receiver = receiver
        self._headers = headers
        self._body = body

    def feed(self, chunk: bytes, *, whole: bool) -> None:
        if whole:
            self._body.feed_all(chunk)  # most deliveries: hashed and kept, no buffer
        else:
            self._body.feed(chunk)

    async def finish(self) -> tuple[int, bytes]:
        verified = self._body.verified(self._headers.get("x-hub-signature-256"))
        receipt, delivery_id = await self._receiver.accept(self._headers, verified)
        return acknowledgement(receipt, delivery_id)

    def release(self) -> None:
        self._body.release()
