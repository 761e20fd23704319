"""Answers to requests refused before any route or middleware runs (aiohttp's parser could
not read them: a header line over its limit, too many header lines, a bad request line, a
bad Content-Length...), in the shape of every other answer: JSON with a message
(docs/api.md, "Errors"), an `X-Request-Id`, and an HTTP/1.1 status line, with
`Connection: close` (after a parse error the rest of the stream cannot be trusted, so
nothing more is read from it).

aiohttp answers such a request through a stand-in request made from
`aiohttp.web_protocol.ERROR`, an HTTP/1.0 message with no headers: its answer's status line
said HTTP/1.0 and no middleware ran to add the request id. `answered_as_http11` makes the
stand-in an HTTP/1.1 one (still `should_close`), and `refusal` gives the answer its id (a
new one: the client's headers were never read)."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http import HttpVersion11
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import ERROR

from bot.contracts.errors import ErrorDetail
from bot.errors import error_body

HEADERS_TOO_LARGE = 431
# aiohttp's words for a head with more header lines than its parser takes (128 by default;
# both its C and its Python parser raise BadHttpMessage with them, there is no class of its
# own). Too many headers are as much "Request Header Fields Too Large" as one too long is
# (RFC 6585, section 5), not a malformed request: a client that cuts its headers down
# succeeds. tests/test_refusal_answers.py fails if aiohttp changes the words.
TOO_MANY_HEADERS = "Too many headers received"
# The stand-in request of an unreadable one, as HTTP/1.1; `should_close` is kept (True), so
# the answer says `Connection: close` and the connection ends after it.
_UNREADABLE_11 = ERROR._replace(version=HttpVersion11)

RequestFactory = Callable[..., web.BaseRequest]


def answered_as_http11(factory: RequestFactory) -> RequestFactory:
    """aiohttp's request factory, making the stand-in of an unreadable request HTTP/1.1
    (tests/test_refusal_answers.py fails if aiohttp stops using `ERROR` for it)."""

    def make(message: Any, *args: Any, **kwargs: Any) -> web.BaseRequest:
        return factory(_UNREADABLE_11 if message is ERROR else message, *args, **kwargs)

    return make


def headers_too_large(exc: BaseException | None) -> bool:
    """A request line or header line over the limit, or more header lines than the limit."""
    if isinstance(exc, LineTooLong):
        return True
    return isinstance(exc, BadHttpMessage) and exc.message.startswith(TOO_MANY_HEADERS)


def refusal_status(exc: BaseException | None, status: int = 500) -> int:
    """431 for a line over the limit or too many header lines, 400 for anything else
    unreadable, else `status` (what aiohttp asked for: 500 for an error outside every
    handler, 504 for its timeout)."""
    if headers_too_large(exc):
        return HEADERS_TOO_LARGE
    return 400 if isinstance(exc, HttpProcessingError) else status


def refusal(exc: BaseException | None, request_id: str, *, status: int = 500) -> web.Response:
    """The JSON answer to a request refused outside the middlewares: one aiohttp could not
    read, or whose error escaped every handler (aiohttp's own answer to that was text).
    It never echoes the request's bytes (aiohttp's message quotes the first 100 of the
    offending line)."""
    status = refusal_status(exc, status)
    detail = None
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the limit"
        message = f"a request line or header line is longer than {limit} bytes"
        code = "headers_too_large"
    elif headers_too_large(exc):
        message = "the request has more header lines than the service takes"
        code = "headers_too_large"
    elif isinstance(exc, HttpProcessingError):
        message = f"the request is not valid HTTP/1.1 ({type(exc).__name__})"
        code = "bad_request"
    else:  # as errors_middleware's 500: nothing of the error, the id to find its log line
        message = "internal error" if status == 500 else HTTPStatus(status).phrase.lower()
        code = "internal_error" if status == 500 else "http_error"
        detail = ErrorDetail(request_id=request_id)
    response = web.json_response(error_body(message, detail, code=code), status=status)
    response.headers["X-Request-Id"] = request_id
    response.force_close()
    return response
