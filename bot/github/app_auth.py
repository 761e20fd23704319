"""GitHub App authentication: the App JWT, cached installation tokens, installation lookup.

GitHub docs, "Generating a JSON Web Token (JWT) for a GitHub App": RS256, `iss` the App id,
`iat` 60 s in the past against clock drift, `exp` at most 10 minutes ahead. Installation
tokens live an hour; we refresh them a margin before `expires_at`. Token length and
format are GitHub's business (it is changing them), so nothing here checks either.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import jwt
import msgspec
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from bot.config_values import ConfigError, Secret
from bot.github.app_records import AccessToken

if TYPE_CHECKING:
    from bot.config import Settings

log = logging.getLogger(__name__)

JWT_BACKDATE_SECONDS = 60
# exp - iat = 600 s: GitHub's maximum, measured from the backdated iat.
JWT_LIFETIME_SECONDS = 540
# A cached JWT is replaced this long before it expires.
JWT_REUSE_MARGIN_SECONDS = 60
# Installation tokens are refreshed this long before `expires_at` so a request that starts
# with a cached token never reaches GitHub with an expired one.
TOKEN_REFRESH_MARGIN_SECONDS = 300.0
# How long a repository -> installation answer is trusted before asking again.
INSTALLATION_LOOKUP_TTL_SECONDS = 3600.0

EpochClock = Callable[[], float]


# The settings an App key can come from; an error names the one this key came from.
PRIVATE_KEY = "PRIVATE_KEY"
PRIVATE_KEY_PATH = "PRIVATE_KEY_PATH"


def private_key_setting(settings: Settings) -> str:
    """Which setting holds the App's key (the settings refuse both at once): the name its
    errors carry, so an operator who set PRIVATE_KEY_PATH is not sent to PRIVATE_KEY."""
    return PRIVATE_KEY_PATH if settings.private_key_path is not None else PRIVATE_KEY


def load_private_key(pem: Secret, *, setting: str = PRIVATE_KEY) -> RSAPrivateKey:
    """The App's RSA key from its PEM; errors name `setting` (where the PEM came from) and
    never include the key material."""
    try:
        return _parsed_key(pem.reveal())
    except _KeyRefused as exc:
        raise ConfigError(f"{setting}: {exc}") from exc


class _KeyRefused(ValueError):
    """Why a PEM is no App key, without saying where it came from (the caller knows)."""


# Parsing a PEM checks the RSA key's numbers: ~40 ms of CPU, and every GitHub client (each
# job, each command) built its credentials from the PEM again. A process has one App key,
# so one parse; the key object is immutable and safe to sign with from any thread. A bad
# PEM is not remembered (lru_cache keeps no exception) and is refused on every load.
@functools.lru_cache(maxsize=4)
def _parsed_key(pem: str) -> RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise _KeyRefused("not a PEM-encoded private key") from exc
    if not isinstance(key, RSAPrivateKey):
        raise _KeyRefused("GitHub App keys are RSA keys; this is another kind")
    return key


def app_jwt_claims(app_id: int, *, now: float) -> dict[str, int | str]:
    issued = int(now) - JWT_BACKDATE_SECONDS
    return {"iat": issued, "exp": int(now) + JWT_LIFETIME_SECONDS, "iss": str(app_id)}


class AppCredentials:
    """The App id and private key; signs (and briefly reuses) App JWTs."""

    def __init__(
        self,
        app_id: int,
        private_key: Secret,
        *,
        clock: EpochClock,
        key_setting: str = PRIVATE_KEY,
    ) -> None:
        self.app_id = app_id
        self._key = load_private_key(private_key, setting=key_setting)
        self._clock = clock
        self._cached: tuple[str, float] | None = None

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id}, private_key=Secret('**********'))"

    def jwt(self) -> str:
        now = self._clock()
        if self._cached is not None and now < self._cached[1] - JWT_REUSE_MARGIN_SECONDS:
            return self._cached[0]
        claims = app_jwt_claims(self.app_id, now=now)
        token = jwt.encode(claims, self._key, algorithm="RS256")
        self._cached = (token, float(claims["exp"]))
        return token


@dataclass(frozen=True)
class InstallationToken:
    token: Secret
    expires_at: float

    @classmethod
    def from_github(cls, answer: AccessToken) -> InstallationToken:
        expires = datetime.fromisoformat(answer.expires_at.replace("Z", "+00:00"))
        return cls(token=Secret(answer.token), expires_at=expires.timestamp())


@dataclass(frozen=True)
class TokenScope:
    """What an installation token is asked for: the installation, and optionally one
    repository ("owner/name", lower case) and the permissions it may use (GitHub's
    fine-grained names; GitHub adds `metadata: read`). None: everything the installation
    was granted, on every repository it covers."""

    installation_id: int
    repo: str | None = None
    permissions: tuple[tuple[str, str], ...] | None = None

    @classmethod
    def of(cls, installation_id: int, repo: str, permissions: dict[str, str]) -> TokenScope:
        return cls(installation_id, repo.lower(), tuple(sorted(permissions.items())))

    def request_body(self) -> dict[str, object] | None:
        """The body of `POST /app/installations/{id}/access_tokens` (None: no narrowing)."""
        body: dict[str, object] = {}
        if self.repo is not None:
            body["repositories"] = [self.repo.split("/", 1)[1]]
        if self.permissions is not None:
            body["permissions"] = dict(self.permissions)
        return body or None

    def describe(self) -> str:
        """For logs: where and what, never the token."""
        where = self.repo or "every repository"
        what = ",".join(f"{k}:{v}" for k, v in self.permissions or ()) or "all permissions"
        return f"installation {self.installation_id}, {where}, {what}"


# Installation tokens by scope, as a process's clients may share them (`TokenCache`).
KeptTokens = dict["TokenScope", "InstallationToken"]


class TokenCache:
    """Installation tokens by scope (installation, repository, permissions), refreshed
    before they expire.

    Concurrent callers for one scope share one fetch (a lock per scope). `kept` lets the
    clients of one process share their tokens: a lifecycle job (and each periodic reconcile
    pass) builds its own client on its own event loop, and each minted the same tokens
    again, once a minute per worker at rest. Only the tokens are shared, never the locks
    (an asyncio lock belongs to one loop); two loops fetching one scope at once both mint,
    as they did before, and the later token is kept."""

    def __init__(
        self,
        fetch: Callable[[TokenScope], Awaitable[InstallationToken]],
        *,
        clock: EpochClock,
        margin: float = TOKEN_REFRESH_MARGIN_SECONDS,
        kept: KeptTokens | None = None,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._margin = margin
        self._tokens: KeptTokens = {} if kept is None else kept
        self._locks: dict[TokenScope, asyncio.Lock] = {}

    async def get(self, scope: TokenScope) -> str:
        cached = self._fresh(scope)
        if cached is not None:
            return cached
        async with self._locks.setdefault(scope, asyncio.Lock()):
            cached = self._fresh(scope)
            if cached is not None:
                return cached
            token = await self._fetch(scope)
            self._tokens[scope] = token
            return token.token.reveal()

    def _fresh(self, scope: TokenScope) -> str | None:
        token = self._tokens.get(scope)
        if token is not None and self._clock() < token.expires_at - self._margin:
            return token.token.reveal()
        return None

    def forget(self, scope: TokenScope) -> None:
        """Forget one token GitHub refused (revoked)."""
        self._tokens.pop(scope, None)

    def invalidate(self, installation_id: int) -> None:
        """Forget every token of an installation (it was removed, or GitHub refused one)."""
        for scope in [s for s in list(self._tokens) if s.installation_id == installation_id]:
            self._tokens.pop(scope, None)


class HandedToken(msgspec.Struct, frozen=True):
    """One kept token as it crosses from a work horse to its worker (`hand_over`)."""

    installation_id: int
    repo: str | None
    permissions: tuple[tuple[str, str], ...] | None
    token: str
    expires_at: float


def hand_over(kept: KeptTokens, *, clock: EpochClock) -> bytes:
    """The tokens of `kept` that are still fresh, for the process that forked this one: an
    RQ work horse mints the scopes its job needs, and its tokens died with it, so the next
    job's horse minted them again (bot.lifecycle.worker sends these over a pipe)."""
    now = clock()
    handed = [
        HandedToken(
            scope.installation_id,
            scope.repo,
            scope.permissions,
            token.token.reveal(),
            token.expires_at,
        )
        for scope, token in list(kept.items())
        if now < token.expires_at - TOKEN_REFRESH_MARGIN_SECONDS
    ]
    return msgspec.json.encode(handed)


def take_over(kept: KeptTokens, data: bytes) -> int:
    """Keep the tokens `hand_over` wrote (a later-expiring one wins over what `kept` holds);
    how many were taken. What cannot be read is dropped: the next job mints as before."""
    try:
        handed = msgspec.json.decode(data, type=list[HandedToken])
    except msgspec.DecodeError:  # a horse killed mid-write (ValidationError is one too)
        return 0
    taken = 0
    for item in handed:
        scope = TokenScope(item.installation_id, item.repo, item.permissions)
        held = kept.get(scope)
        if held is None or held.expires_at < item.expires_at:
            kept[scope] = InstallationToken(Secret(item.token), item.expires_at)
            taken += 1
    return taken


class InstallationLookup:
    """Which installation serves a repository, cached for a while; webhooks prime it with
    what they learn. On a miss it asks `durable` first (what the webhooks stored, e.g.
    `installation_for` in the database: no API call after a restart), then GitHub
    (`GET /repos/{owner}/{repo}/installation`). A repository invalidated because GitHub
    refused its installation is asked of GitHub next, never of the stored answer."""

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[int]],
        *,
        clock: EpochClock,
        ttl: float = INSTALLATION_LOOKUP_TTL_SECONDS,
        durable: Callable[[str], Awaitable[int | None]] | None = None,
    ) -> None:
        self._fetch = fetch
        self._durable = durable
        self._clock = clock
        self._ttl = ttl
        self._known: dict[str, tuple[int, float]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._distrusted: set[str] = set()  # stored answers GitHub has contradicted

    async def get(self, repo: str) -> int:
        key = repo.lower()
        known = self._fresh(key)
        if known is not None:
            return known
        async with self._locks.setdefault(key, asyncio.Lock()):
            known = self._fresh(key)
            if known is not None:
                return known
            stored = await self._stored(repo)
            if stored is not None:
                self._known[key] = (stored, self._clock() + self._ttl)
                return stored
            installation_id = await self._fetch(repo)
            self.remember(repo, installation_id)
            return installation_id

    async def _stored(self, repo: str) -> int | None:
        if self._durable is None or repo.lower() in self._distrusted:
            return None
        try:
            return await self._durable(repo)
        except Exception as exc:  # the database is a shortcut; GitHub still answers
            log.warning("installation lookup for %s: stored answer unavailable (%s)", repo, exc)
            return None

    def _fresh(self, key: str) -> int | None:
        known = self._known.get(key)
        if known is not None and self._clock() < known[1]:
            return known[0]
        return None

    def remember(self, repo: str, installation_id: int) -> None:
        self._known[repo.lower()] = (installation_id, self._clock() + self._ttl)
        self._distrusted.discard(repo.lower())

    def invalidate(self, repo: str) -> None:
        self._known.pop(repo.lower(), None)
        self._distrusted.add(repo.lower())
