"""Request ids: the client's `X-Request-Id`, or one of ours, for log correlation."""

from __future__ import annotations

import random

from aiohttp import web

REQUEST_ID = web.RequestKey("request_id", str)
REQUEST_STARTED = web.RequestKey("request_started", float)  # time.monotonic() on arrival
# Its own generator: request ids never disturb (or depend on) the global `random` state.
_REQUEST_IDS = random.Random()


def request_id_for(sent: str) -> str:
    """The request's id: the client's `X-Request-Id` (its first 64 characters), or a new
    one. Not a secret, only a log correlation id: a PRNG draw, not a syscall per request."""
    return sent[:64] or f"{_REQUEST_IDS.getrandbits(64):016x}"
