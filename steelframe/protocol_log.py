"""Requests aiohttp cannot parse: one log line and a JSON answer, never a traceback.

aiohttp answers a request it cannot parse (a header line over its 8 KB limit, a bad
request line) before any route or middleware runs: with a plain-text 400 built by its
`RequestHandler.handle_error`, after logging the parser's exception with its traceback at
ERROR. On a public port that is noise anyone can generate. Here:

- `QuietProtocolLog` (the handler's `logger`, `handler_args`) keeps one WARNING line per
  refusal, naming the peer and the kind of error but not the offending bytes, and passes
  every other exception through unchanged;
- `QuietAppRunner` serves connections through `QuietRequestHandler`, which answers the
  refusal the way every other error is answered: JSON with a message (docs/api.md,
  "Errors"), 431 for a line over the limit (`LineTooLong`), 400 for anything else
  malformed, with an `X-Request-Id` and an HTTP/1.1 status line, and the connection closed
  (the parser's state is unknown after an error): `http_edge.refusals`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from bot.log_context import bind_id
from http_edge.appkeys import LANE_ROUTES
from http_edge.refusals import answered_as_http11, refusal, refusal_status
from http_edge.request_ids import request_id_for
from steelframe.direct_routes import direct_dispatch
from steelframe.lanes import Lanes

SERVER_LOG = logging.getLogger("steelframe.http.server")


if TYPE_CHECKING:  # generic in the stubs only
    _LoggerAdapter = logging.LoggerAdapter[logging.Logger]
else:
    _LoggerAdapter = logging.LoggerAdapter


class QuietProtocolLog(_LoggerAdapter):
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
                refusal_status(exc),
            )
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)


class QuietRequestHandler(RequestHandler):
    # When the connection's latest bytes arrived (time.monotonic()): a request's clock
    # starts there, so the time a parsed request waited for the busy loop to run its handler
    # counts in what the service measures (time to first frame), as the client sees it.
    received_at: float | None = None

    def data_received(self, data: bytes) -> None:
        self.received_at = time.monotonic()
        super().data_received(data)

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # The client's id, or a new one (an unreadable request's headers were never read),
        # on the log line too.
        request_id = request_id_for(request.headers.get("X-Request-Id", ""))
        bind_id("request_id", request_id)  # this request's task only
        if not isinstance(exc, HttpProcessingError):
            super().handle_error(request, status, exc, message)  # its log line, traceback and all
            return refusal(exc, request_id, status=status)
        # Through the handler's logger (QuietProtocolLog): one line, no traceback.
        self.log_exception("Error handling request from %s", request.remote, exc_info=exc)
        return refusal(exc, request_id)


class QuietServer(web.Server):
    """aiohttp's low-level server, making each connection's handler a QuietRequestHandler
    (aiohttp offers no setting for the handler class), behind the app's fast lanes if it
    declares any (`steelframe.lanes`)."""

    lanes: Lanes | None = None

    def __call__(self) -> asyncio.BaseProtocol:  # type: ignore[override]
        return self.lanes() if self.lanes is not None else self.handler()

    def handler(self) -> RequestHandler:
        return QuietRequestHandler(self, loop=self._loop, **self._kwargs)

    async def shutdown(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 (aiohttp's)
        if self.lanes is None:
            await super().shutdown(timeout)
            return
        await asyncio.gather(self.lanes.shutdown(timeout), super().shutdown(timeout))


class QuietAppRunner(web.AppRunner):
    """`web.AppRunner` whose server is a QuietServer: the app starts up as usual, then its
    server's handler (with the app's direct routes in front, `steelframe.direct_routes`),
    request factory and settings are served through QuietServer."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        quiet = QuietServer(
            direct_dispatch(self.app, server.request_handler),
            request_factory=answered_as_http11(server.request_factory),
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )
        if routes := self.app.get(LANE_ROUTES):
            quiet.lanes = Lanes(routes, quiet.handler, access_log=server._kwargs.get("access_log"))
        return quiet
