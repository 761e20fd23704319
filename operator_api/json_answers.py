"""A typed answer (a bot.contracts Struct) as a JSON response.

Encoded as `web.json_response` encoded the dicts these answers replaced (json.dumps's
separators and ASCII escapes, keys in field order), so their bodies stay byte for byte what
load balancers, health checkers and clients saw before.
"""

from __future__ import annotations

import msgspec
from aiohttp import web


def json_answer(answer: msgspec.Struct, *, status: int = 200) -> web.Response:
    return web.json_response(msgspec.to_builtins(answer), status=status)
