"""The error middleware: a request id on every answer, domain and database errors as JSON
with a message, aiohttp's own errors in the same shape, and unexpected ones a bare 500."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError

from bot.contracts.errors import ErrorDetail
from bot.db import is_lock_timeout
from bot.errors import SteelframeError, TooManyRequests, error_body
from bot.log_context import bind_id
from http_edge.request_ids import REQUEST_ID, REQUEST_STARTED, request_id_for

log = logging.getLogger("steelframe.http")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = request_id_for(request.headers.get("X-Request-Id", ""))
    request[REQUEST_ID] = request_id
    request[REQUEST_STARTED] = getattr(request.protocol, "received_at", None) or time.monotonic()
    bind_id("request_id", request_id)  # each request runs in a task of its own
    try:
        response = await handler(request)
    except SteelframeError as exc:
        log.info(
            "%s %s -> %s %s [%s]",
            request.method,
            logged_path(request),
            exc.status,
            exc.code,
            request_id,
        )
        response = web.json_response(
            error_body(exc.message, exc.detail, code=exc.code), status=exc.status
        )
        if isinstance(exc, TooManyRequests):
            response.headers["Retry-After"] = str(exc.retry_after)
    except (IntegrityError, DataError) as exc:
        # A value that passed validation but the schema refuses (a reference to a row that
        # is gone, a number out of a column's range): the request's fault, and nothing was
        # stored (the transaction rolled back). Named by constraint class, never by values.
        status = 409 if isinstance(exc, IntegrityError) else 400
        _log_database_error(request, request_id, f"{status} database refused", exc)
        response = web.json_response(
            error_body(
                "the request conflicts with stored data"
                if status == 409
                else "a value is out of range for storage",
                ErrorDetail(request_id=request_id),
                code="conflict" if status == 409 else "bad_request",
            ),
            status=status,
        )
    except OperationalError as exc:
        response = _database_unavailable(request, request_id, exc)
    except web.RequestPayloadError as exc:
        response = _undecodable_body(request, request_id, exc)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        # aiohttp's own errors (404 route, 405 method, 413 body) keep the JSON shape.
        response = web.json_response(
            error_body(exc.reason, None, code=_code_for(exc.status)), status=exc.status
        )
        if isinstance(exc, web.HTTPMethodNotAllowed):  # RFC 9110 15.5.6: a 405 says what is
            response.headers["Allow"] = ", ".join(sorted(exc.allowed_methods))
    except ConnectionError:
        # The client went away (a reload while a stream's headers were sent): no answer can
        # reach it, and aiohttp ends the connection quietly. Not a 500 with a traceback.
        raise
    except Exception:
        log.exception(
            "unhandled error on %s %s [%s]", request.method, logged_path(request), request_id
        )
        response = web.json_response(
            error_body("internal error", ErrorDetail(request_id=request_id), code="internal_error"),
            status=500,
        )
    if not response.prepared:
        response.headers["X-Request-Id"] = request_id
    return response


def _database_unavailable(
    request: web.Request, request_id: str, exc: OperationalError
) -> web.Response:
    """A row another process holds past the lock bound (a frozen worker), or a database that
    does not answer: 503 with a reason and when to retry, never a hung request or a 500."""
    if is_lock_timeout(exc):
        message, code = "the data is locked by a process that is not answering", "busy"
    else:
        message, code = "the database is unavailable", "database_unavailable"
    _log_database_error(request, request_id, f"503 {code}", exc)
    response = web.json_response(
        error_body(message, ErrorDetail(request_id=request_id, retry_after=5), code=code),
        status=503,
    )
    response.headers["Retry-After"] = "5"
    return response


def _undecodable_body(
    request: web.Request, request_id: str, exc: web.RequestPayloadError
) -> web.Response:
    """A body aiohttp could not turn back into what was sent: not what its Content-Encoding
    says (gzip, deflate), or a broken chunked framing. Met by whatever reads the body (every
    JSON route, the webhook endpoint): the client's fault, once, here, not a 500 with a
    traceback. Logged by the parser's error class: its text can quote the client's bytes."""
    cause = exc.__cause__ or exc
    log.warning(
        "%s %s -> 400 body not decodable: %s [%s]",
        request.method,
        logged_path(request),
        type(cause).__name__,
        request_id,
    )
    response = web.json_response(
        error_body(
            "the request body could not be decoded",
            ErrorDetail(request_id=request_id),
            code="bad_request",
        ),
        status=400,
    )
    # The rest of the body is not read: the connection closes after the answer, and the
    # stream is ended here, or aiohttp, draining it for the next request on the connection,
    # met the same error again and logged it as an unhandled exception with its traceback.
    request.content.feed_eof()
    response.force_close()
    return response


def logged_path(request: web.Request) -> str:
    """The path as it was sent, percent-encoded: `request.path` is decoded, so a `%0A` in
    it wrote a line of the client's choosing into the log (forged entries, unauthenticated
    through the 401 line). The HTTP parser refuses raw control characters in the target."""
    return request.rel_url.raw_path


def _log_database_error(
    request: web.Request, request_id: str, answer: str, exc: DBAPIError
) -> None:
    """What the database refused, by the driver's error class: never its values."""
    log.warning(
        "%s %s -> %s: %s [%s]",
        request.method,
        logged_path(request),
        answer,
        type(exc.orig).__name__,
        request_id,
    )


def _code_for(status: int) -> str:
    return {
        400: "bad_request",
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        431: "headers_too_large",
    }.get(status, "http_error")
