"""What a fast lane serves (`steelframe.lanes`): the declared routes, and a request's head
as llhttp (httptools) parses it, taken for a lane only in the one simple shape.

The parsing is llhttp's, in its strict mode (request line, header syntax, Content-Length
and its conflicts with Transfer-Encoding, line endings, control bytes); what is ours is
the choice of what a lane serves: a head whose request line is exactly a declared one,
with a Content-Length, no Transfer-Encoding, Content-Encoding, Expect or Upgrade, ASCII
header values and no header twice, at most MAX_LANE_HEADERS headers. Anything else raises
from a callback, which stops llhttp where it is: the connection is then aiohttp's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import httptools

# Headers whose presence means the request is not the simple shape a lane serves. A body in
# a Content-Encoding is aiohttp's to decode (GitHub never sends one): the signature is then
# checked on what it decodes to, and a body that does not decode is a 400
# (http_edge.errors), as on the route; a lane reads the bytes as sent.
_NOT_SIMPLE = frozenset({"transfer-encoding", "content-encoding", "expect", "upgrade"})
# aiohttp's parser refuses a head with more header lines than this (a 431, http_edge/
# refusals.py); llhttp counts none, so a head past it is left to aiohttp to answer alike.
MAX_LANE_HEADERS = 128


class LaneRequest(Protocol):
    """One request being read: fed its body, then finished once, then released."""

    def feed(self, chunk: bytes, *, whole: bool) -> None:
        """The body's next bytes; `whole` when this one chunk is the entire body."""
        ...

    async def finish(self) -> tuple[int, bytes]:
        """The answer's status and JSON body; raises SteelframeError to refuse."""
        ...

    def release(self) -> None: ...


class LaneRoute(Protocol):
    request_line: bytes  # e.g. b"POST /api/github/webhooks HTTP/1.1"
    path: str  # for log lines

    def begin(self, headers: Mapping[str, str], content_length: int) -> LaneRequest:
        """A request from its headers (lower-case names); raises SteelframeError to refuse
        it before its body is read."""
        ...


class LaneRoutes:
    """The declared routes, by (method, target, version) as llhttp reports them."""

    def __init__(self, routes: Mapping[bytes, LaneRoute]) -> None:
        self._routes: dict[tuple[bytes, bytes, str], LaneRoute] = {}
        for line, route in routes.items():
            method, target, version = line.split(b" ")
            self._routes[method, target, version.removeprefix(b"HTTP/").decode("ascii")] = route

    def get(self, method: bytes, target: bytes, version: str) -> LaneRoute | None:
        return self._routes.get((method, target, version))

    def may_declare(self, method: bytes, target: bytes) -> bool:
        """Whether a request line seen up to `target` (perhaps a prefix) can be declared."""
        return any(m == method and t.startswith(target) for m, t, _ in self._routes)


class NotLane(Exception):
    """Raised from a parser callback: the request is not a declared route's shape."""


class HeadParser:
    """One connection's llhttp parser and its callbacks: what llhttp reported of the
    current request. The callbacks only record (or raise NotLane); the lane acts once
    `feed_data` returns. llhttp resets itself between requests; `next()` resets the rest."""

    __slots__ = (
        "body",
        "complete",
        "headers",
        "keep_alive",
        "parser",
        "route",
        "routes",
        "target",
    )

    def __init__(self, routes: LaneRoutes) -> None:
        self.routes = routes
        self.parser = httptools.HttpRequestParser(self)
        self.target = b""
        self.headers: dict[str, str] = {}  # lower-case names, values without OWS
        self.route: LaneRoute | None = None  # set once a head in the lane's shape is parsed
        self.keep_alive = True
        self.body: list[bytes] = []  # chunks reported since the lane last took them
        self.complete = False  # the request's last byte is parsed

    def feed(self, data: bytes | memoryview) -> None:
        """Parse `data`; raises httptools.HttpParserError for a request llhttp refuses or
        a lane does not serve (NotLane, as the error's context)."""
        self.parser.feed_data(data)

    def next(self) -> None:
        self.target, self.headers, self.route, self.complete = b"", {}, None, False

    # httptools' callbacks

    def on_url(self, url: bytes) -> None:  # perhaps in pieces, as the head arrives
        self.target += url
        if not self.routes.may_declare(self.parser.get_method(), self.target):
            raise NotLane

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("ascii").lower()  # a token: llhttp takes nothing else
        if key in self.headers or key in _NOT_SIMPLE or not value.isascii():
            raise NotLane
        if len(self.headers) >= MAX_LANE_HEADERS:
            raise NotLane  # aiohttp answers it: a 431, as on every other route
        self.headers[key] = value.decode("ascii").strip(" \t")

    def on_headers_complete(self) -> None:
        parser = self.parser
        route = self.routes.get(parser.get_method(), self.target, parser.get_http_version())
        if route is None or "content-length" not in self.headers or parser.should_upgrade():
            raise NotLane
        self.route = route
        self.keep_alive = parser.should_keep_alive()  # reset by llhttp once the request ends

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
