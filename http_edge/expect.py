"""`Expect` on every route: `100-continue` answered as aiohttp answers it, any other value a
JSON 417 in the error middleware's shape.

aiohttp runs a route's expect handler before the middlewares, and its default refusal is a
text/plain "Unknown Expect: <value>" (the fuzzer found it: every error of this service is
JSON with a message, and a header's value is never echoed). aiohttp takes an expect handler
only per route (`add_route(expect_handler=...)`), and the routes come from several packages
(the operator API, the webhooks and GUI plugins): `answer_expect_on_every_route` sets it on
each once the app's routes are all added."""

from __future__ import annotations

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11

from bot.contracts.errors import ErrorDetail
from bot.errors import error_body
from http_edge.request_ids import request_id_for

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


async def expect_handler(request: web.Request) -> web.StreamResponse | None:
    """None lets the route's handler (and the middlewares) answer; a response ends here."""
    if request.version != HttpVersion11:  # HTTP/1.0 has no Expect: ignored, as aiohttp does
        return None
    if request.headers.get(hdrs.EXPECT, "").lower() == "100-continue":
        await request.writer.write(CONTINUE)
        request.writer.output_size = 0  # the body's answer has not started yet
        return None
    response = web.json_response(
        error_body(
            "the Expect header is not supported (only 100-continue is)",
            ErrorDetail(header="Expect"),
            code="expectation_failed",
        ),
        status=417,
    )
    response.headers["X-Request-Id"] = request_id_for(request.headers.get("X-Request-Id", ""))
    return response


def answer_expect_on_every_route(app: web.Application) -> None:
    """Give every route of `app` the handler above (aiohttp keeps it on the route: there is no
    app-wide setting; tests/test_expect_header.py fails if aiohttp stops reading it there)."""
    for route in app.router.routes():
        route._expect_handler = expect_handler
