"""HTTP to model endpoints: a client session per stream, failures as operator-safe errors.

Every way a model call can fail (refused connection, silence past the timeout, a 4xx/5xx
answer, a dropped connection, an error event mid-stream) becomes an `UpstreamFailure`: a
`RuntimeError_` whose message names the endpoint and the reason, never a key or a trace,
and which says whether another route may be tried (`retryable`: the endpoint was unavailable
rather than the request wrong).
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import msgspec

from bot.config_values import Secret
from bot.runtimes.base import RuntimeError_

DEFAULT_CONNECT_TIMEOUT = 10.0
ERROR_BODY_LIMIT = 4096  # bytes of an error body read for its message
MESSAGE_LIMIT = 300  # characters of an upstream message shown to the operator
READ_BUFFER = 1 << 20  # one SSE line may carry a large tool-call chunk
# Availability failures: another route may answer. 4xx other than these mean the request
# or the configuration is wrong, and a different model would only hide that.
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
_KEYLIKE = re.compile(r"\b(?:sk|sk-ant|sk-proj|key|ghs|ghp)[-_][A-Za-z0-9_\-*]{6,}")
_BEARER = re.compile(r"(?i)bearer\s+\S+")
_ENCODER = msgspec.json.Encoder()


class UpstreamFailure(RuntimeError_):
    def __init__(
        self,
        message: str,
        *,
        before_content: bool = True,
        retryable: bool = False,
        status: int | None = None,
    ) -> None:
        super().__init__(message, before_content=before_content)
        self.retryable = retryable
        self.status = status

    def after_content(self) -> UpstreamFailure:
        return UpstreamFailure(
            self.message, before_content=False, retryable=self.retryable, status=self.status
        )


@dataclass(frozen=True)
class Endpoint:
    """Where a provider is reached: base URL, key (sent only to this URL) and timeouts."""

    base_url: str
    api_key: Secret | None = None
    read_timeout: float = 120.0
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT

    @property
    def label(self) -> str:
        return endpoint_label(self.base_url)

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def secrets(self) -> tuple[str, ...]:
        return (self.api_key.reveal(),) if self.api_key else ()

    def timeout(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=None,  # a long answer is fine as long as bytes keep coming
            sock_connect=min(self.connect_timeout, self.read_timeout),
            sock_read=self.read_timeout,
        )

    def post(
        self, http: aiohttp.ClientSession, path: str, body: msgspec.Struct, headers: dict[str, str]
    ) -> Any:
        """The streaming POST of a wire Struct as JSON (use with `async with`); the timeouts
        are per request, so a shared session serves endpoints with different settings."""
        return http.post(
            self.url(path),
            data=_ENCODER.encode(body),
            headers={"Content-Type": "application/json", **headers},
            timeout=self.timeout(),
            read_bufsize=READ_BUFFER,
        )


@asynccontextmanager
async def client_session(
    shared: aiohttp.ClientSession | None,
) -> AsyncIterator[aiohttp.ClientSession]:
    """The shared session when the service gave one (connections kept alive across turns),
    else a session of this stream's own, closed with it."""
    if shared is not None:
        yield shared
        return
    async with aiohttp.ClientSession() as own:
        yield own


def endpoint_label(url: str) -> str:
    """The URL without credentials, query or fragment: safe for logs, frames and metadata."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = _BEARER.sub("Bearer [redacted]", text)
    return _KEYLIKE.sub("[redacted]", text)


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def status_retryable(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


def status_phrase(status: int) -> str:
    if status == 529:
        return "overloaded"  # Anthropic's own status, not in the IANA registry
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"


def error_detail(body: Any) -> str:
    """The human part of a provider error object (OpenAI and Anthropic shapes alike), from
    an HTTP error body parsed as JSON: any JSON, since servers differ in what they send."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return error_text(
                error.get("type") or error.get("code"), error.get("message") or error.get("detail")
            )
        if isinstance(error, str):
            return error
    return ""


def error_text(kind: object, message: object) -> str:
    """`kind: message`, or whichever of them there is ("" for neither)."""
    if message and kind and str(kind) not in str(message):
        return f"{kind}: {message}"
    return str(message or kind) if message or kind else ""


def malformed_frame(where: str, exc: msgspec.DecodeError, *, frame: str) -> UpstreamFailure:
    """A streamed frame that is not JSON, or JSON of the wrong shape (a msgspec error names
    the field and what was expected), as a failure; another route is not tried for it."""
    if isinstance(exc, msgspec.ValidationError):
        return UpstreamFailure(f"{where} sent a malformed {frame}: {clip(redact(str(exc)))}")
    return UpstreamFailure(f"{where} sent a {frame} that is not JSON")


async def failure_from_response(
    response: aiohttp.ClientResponse, *, where: str, secrets: Iterable[str]
) -> UpstreamFailure:
    """An HTTP error answer (status >= 400) as a failure carrying the provider's message."""
    raw = await response.content.read(ERROR_BODY_LIMIT)
    text = raw.decode("utf-8", errors="replace")
    try:
        detail = error_detail(json.loads(text))
    except ValueError:
        detail = text
    status = response.status
    message = f"{where} answered HTTP {status} ({status_phrase(status)})"
    if detail.strip():
        message += ": " + clip(redact(detail, secrets))
    return UpstreamFailure(message, retryable=status_retryable(status), status=status)


def failure_from_exception(
    exc: BaseException, *, where: str, read_timeout: float
) -> UpstreamFailure | None:
    """A transport exception as a failure, or None if it is not a transport problem."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamFailure(f"cannot reach {where} ({_connect_reason(exc)})", retryable=True)
    if isinstance(exc, TimeoutError):
        return UpstreamFailure(
            f"{where} sent nothing for {read_timeout:g} s (timed out)", retryable=True
        )
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return UpstreamFailure(f"the connection to {where} was cut off mid-answer", retryable=True)
    if isinstance(exc, aiohttp.ClientError):
        return UpstreamFailure(
            f"the request to {where} failed ({type(exc).__name__})", retryable=True
        )
    return None


def _connect_reason(exc: aiohttp.ClientConnectorError) -> str:
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "host name not found"
    code = exc.os_error.errno
    if code == errno.ECONNREFUSED:
        return "connection refused"
    return os.strerror(code).lower() if code else "connection failed"


DEFAULT_MODEL_CONNECTIONS = 1000


class SharedClient:
    """One client session for all model calls of a process, made on first use (inside the
    running loop, as aiohttp requires) and closed with the service.

    aiohttp's default connector holds 100 connections, which caps a process at 100 model
    streams at once however many operators are waiting; `connections` sizes it (a 30-second
    answer holds its connection for 30 seconds), and `per_host` caps one provider where its
    rate limits need it (0: no cap beyond the total)."""

    def __init__(self, connections: int = DEFAULT_MODEL_CONNECTIONS, per_host: int = 0) -> None:
        self.connections = connections
        self.per_host = per_host
        self._session: aiohttp.ClientSession | None = None

    def get(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=self.per_host)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
