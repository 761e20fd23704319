"""The HTTP server's own log: malformed requests are one line, never a traceback.

aiohttp answers a request it cannot parse (a header line over 8 KB, a bad request line)
with 400 before any route runs, and logs the parser's exception with its traceback at ERROR.
On a public port that is noise anyone can generate. This logger keeps one WARNING line per
refusal, naming the peer and the kind of error but not the offending bytes, and passes every
other exception through unchanged.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError

SERVER_LOG = logging.getLogger("steelframe.http.server")


class QuietProtocolLog(logging.LoggerAdapter):
    """Passed to aiohttp's RequestHandler as its `logger` (`handler_args`)."""

    def __init__(self, logger: logging.Logger = SERVER_LOG) -> None:
        super().__init__(logger, {})

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kwargs: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(exc, BadHttpMessage | HttpProcessingError):
            peer = args[0] if args else "unknown peer"
            self.logger.warning(
                "refused a malformed request from %s: %s (status %s)",
                peer,
                type(exc).__name__,
                getattr(exc, "code", 400),
            )
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)
