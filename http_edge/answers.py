"""Which requests are still waiting for their answer (bot.unanswered counts them)."""

from __future__ import annotations

from aiohttp import web

from http_edge.appkeys import UNANSWERED

AWAITING_ANSWER = web.RequestKey("awaiting_answer", bool)  # counted in app[UNANSWERED]


def awaiting_answer(request: web.Request) -> None:
    """Count the request in `app[UNANSWERED]` until `answered`."""
    request.app[UNANSWERED].arrived()
    request[AWAITING_ANSWER] = True


def answered(request: web.Request) -> None:
    """The request's answer has started (or it ended without one): count it once."""
    if request.get(AWAITING_ANSWER):
        request[AWAITING_ANSWER] = False
        request.app[UNANSWERED].answered()


async def on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """aiohttp's signal as an answer's headers go out: a stream counts as answered at its
    first byte, not when its last frame is written."""
    answered(request)
