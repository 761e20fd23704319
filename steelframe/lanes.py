"""Fast lanes: a declared request line served in front of aiohttp, parsed by httptools
(llhttp, the parser Node.js and uvicorn use), and every other request handed to aiohttp.

Why: a webhook delivery is one request shape, sent by one client, thousands of times a
second at peak. On the webhook benchmark (bench/README.md, "Webhook intake beside Probot")
aiohttp's request machinery (the request object and its header multidict, the response
object, its payload writer, the handler task's bookkeeping) was ~30% of a delivery's CPU,
more than the route's own work. A lane does what that one shape needs and nothing else.

Parsing is llhttp's, in its strict mode: request line, header syntax, Content-Length and
its conflicts with Transfer-Encoding, line endings, control bytes (`steelframe.lane_heads`
holds the callbacks and the choice of what a lane serves). Ours here is the connection, and
one rule that makes a hand-off exact: llhttp is never fed past the first blank line (CRLF
CRLF) of a head it has not finished, nor past a body's declared end, so the first byte of
every request is known. (No hand-off ever needs llhttp's position inside what it was fed.)

What a lane serves: a head llhttp accepts whose request line is exactly a declared one
(`POST /api/github/webhooks HTTP/1.1`), with a Content-Length, no Transfer-Encoding,
Content-Encoding (aiohttp decodes a body), Expect or Upgrade, ASCII header values, no header
twice, within MAX_HEAD bytes. Any other request
(or one llhttp refuses) is handed to aiohttp's own protocol from its first byte, with every
byte not yet consumed, and the connection stays there: aiohttp's parser and answers (400,
413, 431, chunked bodies, 100-continue) apply to it as to any other request. Requests on a
connection are answered in order, one at a time: a request pipelined behind a lane's is
read only once the lane's answer is written. Behind a proxy that reuses its upstream
connections for every route (an nginx upstream keepalive pool), a connection leaves the
lane at its first other request: deliveries on it are still served, by aiohttp.

Answers and errors keep the service's shape: JSON, `X-Request-Id`, the same log line as
`http_edge.errors.errors_middleware` for a refused request. A route begins a
request from its headers (refusing it before a byte of the body is read: the connection
then closes, once what the client still sends of the body has been dropped), is fed the
body as it arrives (a stall of BODY_IDLE_SECONDS is a 408), and finishes with an answer.
A head still incomplete KEEP_ALIVE_SECONDS after the connection opened (or after its last
answer) closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import cast

import httptools
import orjson

from bot.contracts.errors import ErrorDetail
from bot.errors import RequestTimeout, SteelframeError, error_body
from bot.log_context import bind_id, log_ids
from http_edge.request_ids import request_id_for
from steelframe.lane_heads import HeadParser, LaneRequest, LaneRoute, LaneRoutes

log = logging.getLogger("steelframe.http")
# aiohttp's own limit for a request line or header line (8,190 bytes) is per line; a lane
# takes a whole header block this size at most and hands anything larger to aiohttp.
MAX_HEAD = 8190
# Bytes read ahead while a request is answered (pipelined requests) before reading pauses.
MAX_READ_AHEAD = 256 * 1024
KEEP_ALIVE_SECONDS = 75.0  # aiohttp's default: an idle connection, or a slow header block
# A body that stops arriving for this long is dropped with its connection: a client trickling
# a large declared body would otherwise hold its share of the bytes-in-flight budget for good.
BODY_IDLE_SECONDS = 30.0
LINGER_SECONDS = 10.0  # aiohttp's `lingering_time`: dropping a refused body's bytes
SHUTDOWN_POLL_SECONDS = 0.05  # how often shutdown looks at bodies still arriving
_BLANK_LINE = b"\r\n\r\n"  # the end of a head: llhttp (strict) accepts no bare LF


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False


class Lanes:
    """The declared routes and the lanes open now, for one server."""

    def __init__(
        self,
        routes: Mapping[bytes, LaneRoute],
        fallback: Callable[[], asyncio.BaseProtocol],
        *,
        access_log: logging.Logger | None = None,
    ) -> None:
        self.routes = LaneRoutes(routes)
        self.fallback = fallback
        self.access_log = access_log
        self.open: set[LaneProtocol] = set()
        self.stopping = False
        self.answered = 0  # requests answered on a lane
        self.handed_off = 0  # connections given to aiohttp
        self._date = (0, b"")

    def __call__(self) -> asyncio.BaseProtocol:
        """The server's protocol factory: a lane per connection."""
        if self.stopping:
            return self.fallback()
        return LaneProtocol(self)

    def date(self) -> bytes:
        """The Date header's value, formatted once a second."""
        now = int(time.time())
        if self._date[0] != now:
            self._date = (now, formatdate(now, usegmt=True).encode("ascii"))
        return self._date[1]

    async def shutdown(self, within: float | None) -> None:
        """Close idle lanes now, and the others after their answer (a body still arriving
        is read and answered too), within `within` seconds; then close whatever is left."""
        self.stopping = True
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        for lane in list(self.open):
            lane.close_after_answer = True
            if lane.answering is None and lane.reading is None:
                lane.close()
        while busy := [lane for lane in self.open if lane.answering or lane.reading]:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                break
            answers = [lane.answering for lane in busy if lane.answering is not None]
            if answers:
                await asyncio.wait(answers, timeout=left)
            else:  # bodies still arriving: look again shortly
                await asyncio.sleep(min(SHUTDOWN_POLL_SECONDS, left or SHUTDOWN_POLL_SECONDS))
        for lane in list(self.open):
            lane.close()


class LaneProtocol(asyncio.Protocol):
    """One connection, served here while its requests are a declared route's shape."""

    def __init__(self, lanes: Lanes) -> None:
        self._lanes = lanes
        self._transport: asyncio.Transport | None = None
        self._message = HeadParser(lanes.routes)
        # Bytes received: the current request begins at `_start` (kept until its head is
        # taken, for a hand-off), and llhttp has been fed them up to `_at`.
        self._data = b""
        self._start = 0
        self._at = 0
        self._paused = False  # reading paused: read ahead too far, or writes backed up
        self._writes_paused = False
        self._idle: asyncio.TimerHandle | None = None
        self._dropping = -1  # bytes of a refused body still to drop, when lingering
        self.reading: _Reading | None = None  # the request whose body is being read
        self.answering: asyncio.Task[None] | None = None
        self.close_after_answer = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; they have its methods.
        self._transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):  # answers are small: send them at once
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._lanes.open.add(self)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if self._dropping >= 0:
            self._drop(len(data))
            return
        keep = self._start if self.reading is None else self._at
        if keep < len(self._data):
            self._data = self._data[keep:] + data
        else:
            self._data = data
        self._start -= keep
        self._at -= keep
        self._advance()
        if not self._paused and self._unread() > MAX_READ_AHEAD and self._transport:
            self._pause()

    def eof_received(self) -> bool | None:
        return None  # the transport closes; an answer under way is dropped, as in aiohttp

    def connection_lost(self, exc: Exception | None) -> None:
        self._lanes.open.discard(self)
        self._cancel_idle()
        if self.reading is not None:
            self.reading.request.release()
            self.reading = None
        self._transport = None
        self._data, self._start, self._at = b"", 0, 0

    def pause_writing(self) -> None:
        self._writes_paused = True
        self._pause()

    def resume_writing(self) -> None:
        self._writes_paused = False
        self._resume()

    # Serving

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def _advance(self) -> None:
        """Take what the buffer holds: a body's next bytes, or the next request's head."""
        while self._transport is not None and self.answering is None:
            if self.reading is not None:
                if not self._read_body():
                    return
                continue
            if not self._unread() or not self._read_head():
                return

    def _unread(self) -> int:
        return len(self._data) - self._at

    def _read_head(self) -> bool:
        """Feed llhttp the next head's bytes, never past its first blank line; once it is
        a declared route's, begin the request. False if more bytes are needed or the
        connection left the lane."""
        data, start, message = self._data, self._start, self._message
        # A blank line may straddle what was fed before and what just arrived.
        end = data.find(_BLANK_LINE, max(start, self._at - 3), start + MAX_HEAD + 4)
        if end < 0 and len(data) - start > MAX_HEAD:
            self._hand_off()
            return False
        upto = len(data) if end < 0 else end + len(_BLANK_LINE)
        try:
            message.feed(memoryview(data)[self._at : upto])
        except httptools.HttpParserError:  # refused by llhttp, or NotLane: aiohttp's
            self._hand_off()
            return False
        self._at = upto
        route = message.route
        if route is None:  # leading empty lines, or the head still arriving
            return end >= 0
        if end < 0 or message.body:  # llhttp's head ended before the blank line: never
            return self._disagree("a head")
        self._start = upto
        self._cancel_idle()
        headers = message.headers
        length = int(headers["content-length"])  # llhttp's digits, checked as it parsed
        request_id = request_id_for(headers.get("x-request-id", ""))
        try:
            request = route.begin(headers, length)
        except Exception as exc:
            # Refused before reading the body: answer, and close rather than read it.
            answer = _failure(route, exc, request_id)
            self._write(answer, route, request_id, close=True, unread=length)
            return False
        self.reading = _Reading(route, request, request_id, length, message.keep_alive)
        return True

    def _read_body(self) -> bool:
        """Feed llhttp what the buffer holds of the body, never past its end; once whole,
        answer. False if more bytes are needed."""
        reading, message = self.reading, self._message
        assert reading is not None
        at = self._at
        take = min(reading.remaining, len(self._data) - at)
        if reading.remaining and not take:
            return False
        if take:
            try:
                message.feed(memoryview(self._data)[at : at + take])
            except httptools.HttpParserError:  # a Content-Length body: never
                return self._disagree("a body")
            self._at = self._start = at + take
            reading.remaining -= take
        chunks, message.body = message.body or [b""], []  # b"": Content-Length 0
        whole = take == reading.length and len(chunks) == 1
        try:
            for chunk in chunks:
                reading.request.feed(chunk, whole=whole)
        except Exception as exc:
            self.reading = None
            reading.request.release()
            failure = _failure(reading.route, exc, reading.request_id)
            self._write(
                failure, reading.route, reading.request_id, close=True, unread=reading.remaining
            )
            return False
        if reading.remaining:
            self._cancel_idle()  # armed again with each chunk: only a stall ends it
            self._idle = asyncio.get_running_loop().call_later(BODY_IDLE_SECONDS, self._stalled)
            return False
        if not message.complete:  # llhttp ends a request where its Content-Length does
            return self._disagree("a request's end")
        self._cancel_idle()
        self.reading = None
        message.next()
        self.answering = asyncio.get_running_loop().create_task(self._answer(reading))
        return False

    def _disagree(self, what: str) -> bool:
        """llhttp framed a request otherwise than the lane fed it (its strict mode makes
        this impossible): no byte after it can be trusted to anyone, so close."""
        log.error("llhttp and the lane disagree on where %s ends; connection closed", what)
        if self.reading is not None:
            self.reading.request.release()
            self.reading = None
        self.close()
        return False

    async def _answer(self, reading: _Reading) -> None:
        bind_id("request_id", reading.request_id)  # the task's own context
        try:
            try:
                status, body = await reading.request.finish()
                answer = Answer(status, body)
            except Exception as exc:
                answer = _failure(reading.route, exc, reading.request_id)
        finally:
            reading.request.release()
        self.answering = None
        self._write(answer, reading.route, reading.request_id, close=not reading.keep_alive)
        if self._transport is not None and not self._transport.is_closing():
            self._arm_idle()
            self._resume()
            self._advance()

    def _write(
        self, answer: Answer, route: LaneRoute, request_id: str, *, close: bool, unread: int = 0
    ) -> None:
        """Send the answer; close after it if asked to (or the answer or a shutdown asks),
        dropping the `unread` bytes of the request's body first."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._lanes.answered += 1
        close = close or answer.close or self.close_after_answer
        extra = b"".join(b"%s: %s\r\n" % (n.encode(), v.encode()) for n, v in answer.headers)
        transport.write(
            _HEAD
            % (
                answer.status,
                _reason(answer.status),
                len(answer.body),
                self._lanes.date(),
                request_id.encode("ascii"),
            )
            + extra
            + (b"Connection: close\r\n\r\n" if close else b"\r\n")
            + answer.body
        )
        if self._lanes.access_log is not None:
            peer = transport.get_extra_info("peername")
            # aiohttp's format, less what a lane does not keep (referer, user agent).
            self._lanes.access_log.info(
                '%s "%s" %s %s',
                peer[0] if peer else "-",
                route.request_line.decode("ascii"),
                answer.status,
                len(answer.body),
            )
        if close:
            self._linger(unread)

    def _hand_off(self) -> None:
        """Give the connection to aiohttp's protocol, with every byte from the first of the
        request the lane does not serve."""
        transport = self._transport
        assert transport is not None
        self._lanes.open.discard(self)
        self._lanes.handed_off += 1
        self._cancel_idle()
        self._transport = None
        protocol = self._lanes.fallback()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self._start < len(self._data):
            cast(asyncio.Protocol, protocol).data_received(self._data[self._start :])
        self._data, self._start, self._at = b"", 0, 0
        if self._paused:
            transport.resume_reading()

    def _linger(self, unread: int) -> None:
        """Close once the client has sent the rest of a refused body, or LINGER_SECONDS on.
        Closing with bytes unread would reset the connection, and a client still sending
        might lose the answer with it; the bytes are dropped as they come, never kept."""
        transport = self._transport
        assert transport is not None
        self._cancel_idle()
        self._dropping = unread
        buffered = self._unread()
        self._data, self._start, self._at = b"", 0, 0
        self._drop(buffered)
        if not transport.is_closing():
            if transport.can_write_eof():
                transport.write_eof()  # the answer is whole: the client may stop waiting
            self._resume()
            self._idle = asyncio.get_running_loop().call_later(LINGER_SECONDS, self.close)

    def _drop(self, size: int) -> None:
        self._dropping -= size
        if self._dropping <= 0:
            self.close()

    def _pause(self) -> None:
        if not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def _resume(self) -> None:
        if (
            self._paused
            and not self._writes_paused
            and self._transport is not None
            and self._unread() <= MAX_READ_AHEAD
        ):
            self._paused = False
            self._transport.resume_reading()

    def _arm_idle(self) -> None:
        self._cancel_idle()
        self._idle = asyncio.get_running_loop().call_later(KEEP_ALIVE_SECONDS, self.close)

    def _stalled(self) -> None:
        """A body stopped arriving: 408, and the connection closed (nothing is left unread
        that the client has sent)."""
        reading, self.reading = self.reading, None
        self._idle = None
        if reading is None:
            return
        reading.request.release()
        stall = RequestTimeout(f"the request body stopped arriving for {BODY_IDLE_SECONDS:g} s")
        self._write(
            _failure(reading.route, stall, reading.request_id),
            reading.route,
            reading.request_id,
            close=True,
        )

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


@dataclass(slots=True)
class _Reading:
    route: LaneRoute
    request: LaneRequest
    request_id: str
    length: int
    keep_alive: bool
    remaining: int = 0

    def __post_init__(self) -> None:
        self.remaining = self.length


def _failure(route: LaneRoute, exc: Exception, request_id: str) -> Answer:
    """The JSON answer to an error, logged as `errors_middleware` logs it: a domain error's
    status and message, anything else a bare 500 (the details go to the log only)."""
    with log_ids(request_id=request_id):  # bound already in an answer's task, not here
        if not isinstance(exc, SteelframeError):
            log.error("unhandled error on POST %s [%s]", route.path, request_id, exc_info=exc)
            body = error_body(
                "internal error", ErrorDetail(request_id=request_id), code="internal_error"
            )
            return Answer(500, orjson.dumps(body))
        log.info("POST %s -> %s %s [%s]", route.path, exc.status, exc.code, request_id)
    retry_after = getattr(exc, "retry_after", None)
    return Answer(
        exc.status,
        orjson.dumps(error_body(exc.message, exc.detail, code=exc.code)),
        headers=(("Retry-After", str(retry_after)),) if retry_after is not None else (),
        close=retry_after is not None,
    )


_HEAD = (
    b"HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\n"
    b"Content-Length: %d\r\nDate: %s\r\nX-Request-Id: %s\r\n"
)


@functools.cache
def _reason(status: int) -> bytes:
    return HTTPStatus(status).phrase.encode("ascii")
