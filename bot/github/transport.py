"""One HTTP exchange with GitHub: headers, pacing, retries and waits, error mapping.

Plain aiohttp plus gidgethub's sans-I/O pieces (`create_headers`, `decipher_response` for
bodies and `Link` pagination). gidgethub's own `GitHubAPI` freezes the headers of a call
across its retries, so a token that expires or is revoked mid-call could not be replaced;
here the credential is asked for again on every attempt.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from gidgethub import sansio
from yarl import URL

from bot.github.errors import (
    GitHubError,
    GitHubNotFound,
    GitHubRateLimited,
    GitHubRejected,
    GitHubUnavailable,
)
from bot.github.pacing import Pacer
from bot.github.retry import (
    RetryPolicy,
    Verdict,
    classify,
    rate_limit_wait,
    server_error_wait,
)

log = logging.getLogger(__name__)
ACCEPT = "application/vnd.github+json"
API_VERSION = "2022-11-28"
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Credential:
    """How a request authenticates: a JWT (the App) or an installation token.

    `token` is awaited on every attempt; `forget` drops a token GitHub refused (401) so
    the single retry that follows fetches a fresh one."""

    kind: str  # "jwt" | "token"
    token: Callable[[], Awaitable[str]]
    pace_key: int | None = None
    forget: Callable[[], None] | None = None


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    data: Any
    next_url: str | None


# Told of every answer GitHub gives (method, status, installation or None, headers): metrics.
Observer = Callable[[str, int, str | None, Mapping[str, str]], None]


@dataclass(frozen=True)
class _Answer:
    """An error answer: its status, headers and GitHub's message (with any 422 details)."""

    status: int
    headers: Mapping[str, str]
    message: str


class Transport:
    def __init__(
        self,
        *,
        base_url: str,
        user_agent: str,
        pacer: Pacer,
        retry: RetryPolicy,
        clock: Callable[[], float],
        sleep: Sleep,
        timeout: float = 30.0,
        session: aiohttp.ClientSession | None = None,
        observe: Observer | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.observe = observe
        self.user_agent = user_agent
        self.pacer = pacer
        self.retry = retry
        self._clock = clock
        self._sleep = sleep
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = session
        self._owns_session = session is None

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use: a ClientSession belongs to the running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
            self._owns_session = True
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
        self._session = None

    def url(self, path: str) -> URL:
        """`path` is already percent-encoded by the caller (labels hold ':' and spaces)."""
        if path.startswith(("http://", "https://")):
            return URL(path, encoded=True)
        return URL(self.base_url + path, encoded=True)

    async def request(
        self,
        method: str,
        path: str,
        *,
        credential: Credential,
        payload: Any = None,
        params: Mapping[str, str] | None = None,
        retry_server_errors: bool = True,
        follow_redirects: bool = True,
    ) -> Response:
        """Send, retrying 5xx/network failures and rate limits by the policy.

        `retry_server_errors=False` is for creates: a 5xx may come after GitHub acted, so
        the caller checks before sending again (rate-limit answers are never acted on).
        `follow_redirects=False` answers a 3xx as it is (its `Location` in the headers): a
        redirect that leaves the API must not carry the token."""
        url = self.url(path)
        if params:
            url = url.update_query(params)
        body = b"" if payload is None else json.dumps(payload).encode()
        attempt = strikes = 0
        reauthenticated = False
        while True:
            attempt += 1
            try:
                status, headers, raw = await self._send(
                    method, url, body, credential, follow_redirects
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                wait = self._unanswered_wait(method, url, exc, attempt, retry_server_errors)
                await self._sleep(wait)
                continue
            if not follow_redirects and 300 <= status < 400 and "Location" in headers:
                return Response(status, headers, None, None)
            answer = _Answer(status, headers, _message(headers, raw))
            verdict = classify(status, headers, answer.message)
            if verdict is Verdict.OK:
                data, _, next_url = sansio.decipher_response(status, headers, raw)
                return Response(status, headers, data, next_url)
            if status == 401 and credential.forget is not None and not reauthenticated:
                # A cached installation token can be revoked before it expires.
                credential.forget()
                reauthenticated = True
                continue
            if verdict is Verdict.RATE_LIMITED:
                strikes += 1
            wait = await self._retry_wait(
                answer, verdict, attempt, strikes, credential, retry_server_errors
            )
            log.warning(
                "github %s %s -> %d (%s); retry %d in %.1fs",
                method,
                url.path,
                status,
                verdict,
                attempt,
                wait,
            )
            await self._sleep(wait)

    def _unanswered_wait(
        self, method: str, url: URL, exc: Exception, attempt: int, retry_server_errors: bool
    ) -> float:
        """How long to wait before sending again after GitHub did not answer at all (or
        raise: attempts used up, or a create that must not be sent twice blindly)."""
        if attempt >= self.retry.max_attempts or not retry_server_errors:
            raise GitHubUnavailable(
                f"GitHub did not answer {method} {url.path}: {type(exc).__name__}"
            ) from exc
        wait = server_error_wait({}, attempt=attempt, policy=self.retry)
        log.warning(
            "github %s %s: %s; retry %d in %.1fs",
            method,
            url.path,
            type(exc).__name__,
            attempt,
            wait,
        )
        return wait

    async def _retry_wait(
        self,
        answer: _Answer,
        verdict: Verdict,
        attempt: int,
        strikes: int,
        credential: Credential,
        retry_server_errors: bool,
    ) -> float:
        """How long to wait before retrying an error answer, or the error to raise: a final
        refusal, attempts used up, or a rate-limit wait longer than the policy allows. A
        rate-limit wait also holds back every call of the same installation (the pacer)."""
        if verdict is Verdict.FAIL:
            raise _failure(answer.status, answer.headers, answer.message)
        if attempt >= self.retry.max_attempts or (
            verdict is Verdict.SERVER_ERROR and not retry_server_errors
        ):
            raise _exhausted(verdict, answer.status, answer.headers, answer.message)
        if verdict is not Verdict.RATE_LIMITED:
            return server_error_wait(answer.headers, attempt=attempt, policy=self.retry)
        wait = rate_limit_wait(answer.headers, now=self._clock(), strike=strikes, policy=self.retry)
        if wait > self.retry.max_wait:
            raise GitHubRateLimited(
                f"GitHub rate limit: asked to wait {wait:.0f}s ({answer.message})",
                retry_at=self._clock() + wait,
                github_status=answer.status,
                request_id=answer.headers.get("x-github-request-id"),
            )
        if credential.pace_key is not None:
            await self.pacer.block_until(credential.pace_key, self._clock() + wait)
        return wait

    async def _send(
        self,
        method: str,
        url: URL,
        body: bytes,
        credential: Credential,
        follow_redirects: bool = True,
    ) -> tuple[int, Mapping[str, str], bytes]:
        token = await credential.token()
        if credential.kind == "jwt":
            headers = sansio.create_headers(self.user_agent, accept=ACCEPT, jwt=token)
        else:
            headers = sansio.create_headers(self.user_agent, accept=ACCEPT, oauth_token=token)
        headers["x-github-api-version"] = API_VERSION
        if body:
            headers["content-type"] = "application/json"
        if credential.pace_key is None:
            answer = await self._exchange(method, url, headers, body, follow_redirects)
        else:
            async with self.pacer.slot(credential.pace_key, method):
                answer = await self._exchange(method, url, headers, body, follow_redirects)
        if self.observe is not None:
            installation = None if credential.pace_key is None else str(credential.pace_key)
            self.observe(method, answer[0], installation, answer[1])
        return answer

    async def _exchange(
        self,
        method: str,
        url: URL,
        headers: dict[str, str],
        body: bytes,
        follow_redirects: bool = True,
    ) -> tuple[int, Mapping[str, str], bytes]:
        async with self._client().request(
            method, url, headers=headers, data=body, allow_redirects=follow_redirects
        ) as resp:
            return resp.status, resp.headers, await resp.read()

    async def download_tail(self, url: str, *, max_bytes: int) -> tuple[bytes, bool]:
        """GET `url` with no credential (where a redirect from the API points: GitHub's
        signed log storage) and keep its last `max_bytes`; (bytes, whether cut)."""
        kept = bytearray()
        cut = False
        try:
            async with self._client().get(
                URL(url, encoded=True), headers={"User-Agent": self.user_agent}
            ) as resp:
                if resp.status != 200:
                    raise _failure(resp.status, resp.headers, f"download answered {resp.status}")
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    kept += chunk
                    if len(kept) > max_bytes:
                        del kept[: len(kept) - max_bytes]
                        cut = True
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise GitHubUnavailable(f"download failed: {type(exc).__name__}") from exc
        return bytes(kept), cut


def _message(headers: Mapping[str, str], raw: bytes) -> str:
    if not raw or "json" not in headers.get("content-type", ""):
        return ""
    try:
        data = json.loads(raw)
    except ValueError:
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, str):
        return ""
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        # 422s explain themselves in `errors` (field, code, message).
        parts = [_error_text(e) for e in errors]
        message = f"{message}: {'; '.join(parts)}"
    return message


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or f"{error.get('field')} {error.get('code')}")
    return str(error)


def _failure(status: int, headers: Mapping[str, str], message: str) -> GitHubError:
    request_id = headers.get("x-github-request-id")
    text = message or f"GitHub answered {status}"
    if status in (404, 410):
        return GitHubNotFound(text, github_status=status, request_id=request_id)
    return GitHubRejected(text, github_status=status, request_id=request_id)


def _exhausted(
    verdict: Verdict, status: int, headers: Mapping[str, str], message: str
) -> GitHubError:
    request_id = headers.get("x-github-request-id")
    if verdict is Verdict.RATE_LIMITED:
        return GitHubRateLimited(
            f"GitHub rate limit persisted: {message or status}",
            github_status=status,
            request_id=request_id,
        )
    return GitHubUnavailable(
        f"GitHub kept failing: {message or status}", github_status=status, request_id=request_id
    )
