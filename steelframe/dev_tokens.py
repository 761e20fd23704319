"""Tokens minted by `steelframe dev` are for dev only: they carry DEV_TOKEN_PREFIX, and a
service that is not dev refuses them before looking them up. A dev started (by mistake) on
a production database leaves an operator there whose token still opens nothing."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from bot.errors import Unauthorized

DEV_TOKEN_PREFIX = "sfd_"
# Set on every app by create_app: whether this service is `steelframe dev` (for places that
# read a token from a body, e.g. the web GUI's sign-in, which the middleware does not see).
DEV_TOKENS_ACCEPTED = web.AppKey("dev_tokens_accepted", bool)
REFUSED = "a token of `steelframe dev` is refused by this service: use `steelframe operator create`"


def is_dev_token(token: str) -> bool:
    """For every place a token arrives: the Authorization header here; the web GUI's
    sign-in (which reads its own body) is to refuse one too unless the app's
    DEV_TOKENS_ACCEPTED is set."""
    return token.strip().startswith(DEV_TOKEN_PREFIX)


@web.middleware
async def refuse_dev_tokens(request: web.Request, handler: Handler) -> web.StreamResponse:
    """401 for a dev bearer token; everything else passes untouched."""
    _, _, bearer = request.headers.get("Authorization", "").partition(" ")
    if is_dev_token(bearer):
        raise Unauthorized(REFUSED)
    return await handler(request)
