"""`GitHubClient`: the REST calls Steelframe makes as a GitHub App, one method each (the
calls after a pull request opens are in `bot.github.pull_request_calls`).

Repositories are "owner/name" strings. Every call authenticates as the installation that
serves the repository (looked up and cached) with a token limited to that one repository
and the least permission the call needs (`bot.github.permissions`; tokens cached per
installation, repository and permissions), goes through the per-installation pacer (all of
an installation's tokens share its rate budget, as on GitHub) and the retry rules in
`bot.github.transport`, and fails with a `bot.github.errors` error carrying GitHub's status
and message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import aiohttp
import redis

from bot.config import Settings
from bot.config_values import Secret
from bot.contracts.errors import ErrorDetail
from bot.github.app_auth import (
    PRIVATE_KEY,
    AppCredentials,
    InstallationLookup,
    InstallationToken,
    KeptTokens,
    TokenCache,
    TokenScope,
    private_key_setting,
)
from bot.github.app_records import AccessToken, App, CollaboratorPermission, Installation
from bot.github.errors import GitHubError, GitHubNotFound, GitHubRejected, GitHubUnavailable
from bot.github.installation_removals import (
    InstallationRemovals,
    SharedInstallationLookup,
    suspended,
)
from bot.github.issue_records import Issue, IssueComment, Label, PullRequest, Repository
from bot.github.pacing import Ledger, Pacer, PacingPolicy
from bot.github.permissions import needed_permissions, repo_path, split_repo
from bot.github.pull_request_calls import PullRequestCalls
from bot.github.records import (
    record,
    records,
)
from bot.github.retry import RetryPolicy, server_error_wait
from bot.github.shared_pacing import DEFAULT_PREFIX, RedisLedger
from bot.github.transport import Credential, Observer, Response, Transport

log = logging.getLogger(__name__)
T = TypeVar("T")
USER_AGENT = "steelframe-github-app"
PER_PAGE = 100
MAX_PAGES = 100
# GitHub's answer when DELETE .../labels/{name} names a label the issue does not carry.
LABEL_MISSING_MESSAGE = "Label does not exist"
PERMISSIONS = ("admin", "write", "read", "none")
# How many of the newest App-made issues/comments to look through after a create failed
# with 5xx, before sending it again.
RECONCILE_WINDOW = 30


@dataclass(frozen=True)
class AppIdentity:
    id: int
    slug: str
    name: str
    bot_login: str
    html_url: str


class GitHubClient(PullRequestCalls):
    """The App's REST client. Create once per process; `await close()` at shutdown."""

    def __init__(
        self,
        *,
        app_id: int,
        private_key: Secret,
        base_url: str = "https://api.github.com",
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        retry: RetryPolicy | None = None,
        pacing: PacingPolicy | None = None,
        ledger: Ledger | None = None,
        session: aiohttp.ClientSession | None = None,
        user_agent: str = USER_AGENT,
        observe: Observer | None = None,
        stored_installation: Callable[[str], Awaitable[int | None]] | None = None,
        kept_tokens: KeptTokens | None = None,
        key_setting: str = PRIVATE_KEY,
        installation_removals: InstallationRemovals | None = None,
    ) -> None:
        # `key_setting`: where `private_key` came from, named by a refusal of it.
        self.app = AppCredentials(app_id, private_key, clock=clock, key_setting=key_setting)
        self._clock = clock
        self._sleep = sleep
        # With a shared ledger (Redis), every process paces one budget per installation.
        self.pacer = Pacer(pacing or PacingPolicy(), clock=clock, sleep=sleep, ledger=ledger)
        self.transport = Transport(
            base_url=base_url,
            user_agent=user_agent,
            pacer=self.pacer,
            retry=retry or RetryPolicy(),
            clock=clock,
            sleep=sleep,
            session=session,
            observe=observe,
        )
        # `kept_tokens`: shared with the process's other clients (bot.lifecycle.context).
        self.tokens = TokenCache(self._fetch_token, clock=clock, kept=kept_tokens)
        # `stored_installation`: what the webhooks recorded (bot.github.installations), asked
        # before GitHub is.
        # `installation_removals`: uninstalls handled by another process (Redis), forgotten
        # before each answer (bot.github.installation_removals).
        self._removals = installation_removals
        self.installations = (
            InstallationLookup(self._fetch_installation, clock=clock, durable=stored_installation)
            if installation_removals is None
            else SharedInstallationLookup(
                self._fetch_installation,
                removals=installation_removals,
                clock=clock,
                durable=stored_installation,
            )
        )
        self._identity: AppIdentity | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> GitHubClient:
        key = settings.private_key_pem()
        if settings.app_id is None or key is None:
            raise ValueError("GitHub App is not configured (APP_ID and PRIVATE_KEY[_PATH])")
        options: dict[str, Any] = {
            "key_setting": private_key_setting(settings),
            "base_url": settings.github_api_url,
            "pacing": PacingPolicy(min_interval=settings.github_write_interval),
        }
        if settings.redis_url and "ledger" not in overrides:
            prefix = f"{DEFAULT_PREFIX}:{settings.app_id}"
            options["ledger"] = RedisLedger.from_url(settings.redis_url, prefix=prefix)
        if settings.redis_url and "installation_removals" not in overrides:
            options["installation_removals"] = InstallationRemovals(
                redis.Redis.from_url(settings.redis_url), app_id=settings.app_id
            )
        options.update(overrides)
        return cls(app_id=settings.app_id, private_key=key, **options)

    def __repr__(self) -> str:
        return f"GitHubClient(app_id={self.app.app_id}, base_url={self.transport.base_url!r})"

    async def close(self) -> None:
        await self.transport.close()
        await self.pacer.close()
        if self._removals is not None:
            self._removals.connection.close()

    # -- App identity and installation auth ---------------------------------------------

    def _app_credential(self) -> Credential:
        async def token() -> str:
            return self.app.jwt()

        return Credential("jwt", token)

    async def identity(self) -> AppIdentity:
        """The App itself (`GET /app`), fetched once: its slug names its bot user
        `<slug>[bot]`, which is how the App recognises comments it wrote."""
        if self._identity is None:
            response = await self.transport.request(
                "GET", "/app", credential=self._app_credential()
            )
            app = record(App, response.data)
            if not app.slug:
                raise GitHubRejected("GitHub's answer to GET /app names no slug")
            self._identity = AppIdentity(
                id=app.id,
                slug=app.slug,
                name=app.name or app.slug,
                bot_login=f"{app.slug}[bot]",
                html_url=app.html_url,
            )
        return self._identity

    @property
    def app_slug(self) -> str | None:
        """Known after the first `await identity()` (the webhooks plugin loads it at start)."""
        return None if self._identity is None else self._identity.slug

    @property
    def bot_login(self) -> str | None:
        return None if self._identity is None else self._identity.bot_login

    async def is_app_login(self, login: str) -> bool:
        return login.lower() == (await self.identity()).bot_login.lower()

    async def _fetch_installation(self, repo: str) -> int:
        """The installation GitHub names for `repo`; a suspended one (its `suspended_at`
        set) is refused as the shared lookup refuses one it was told of, uncached: a process
        that started after the suspension was told never reads it from the stream."""
        response = await self.transport.request(
            "GET", f"{repo_path(repo)}/installation", credential=self._app_credential()
        )
        installation = record(Installation, response.data)
        if installation.suspended_at is not None:
            raise suspended(installation.id)
        return installation.id

    async def _fetch_token(self, scope: TokenScope) -> InstallationToken:
        response = await self.transport.request(
            "POST",
            f"/app/installations/{scope.installation_id}/access_tokens",
            credential=self._app_credential(),
            payload=scope.request_body(),
        )
        log.info("github: new token (%s)", scope.describe())
        return InstallationToken.from_github(record(AccessToken, response.data))

    async def _token(self, repo: str, scope: TokenScope) -> str:
        try:
            return await self.tokens.get(scope)
        except GitHubNotFound:
            # The App was uninstalled or moved: ask again which installation serves it.
            self.installations.invalidate(repo)
            raise

    async def installation_id(self, repo: str) -> int:
        return await self.installations.get(repo)

    async def installation_token(self, repo: str) -> str:
        """A current token of the installation that serves `repo`, with everything the
        installation was granted (for git over HTTPS: user `x-access-token`, this as the
        password). Not used for a task: tasks use `scoped_token`. Never log it."""
        return await self._token(repo, TokenScope(await self.installations.get(repo)))

    async def scoped_token(self, repo: str, permissions: dict[str, str]) -> str:
        """A token for `repo` alone with only `permissions` (for one git step of a task:
        `{"contents": "read"}` to clone, `"write"` to push), cached like every scope.
        Never log it."""
        scope = TokenScope.of(await self.installations.get(repo), repo, permissions)
        return await self._token(repo, scope)

    async def _repo_credential(self, repo: str, permissions: dict[str, str]) -> Credential:
        """A token for `repo` alone with `permissions`, paced (and rate-budgeted) with
        every other token of its installation."""
        installation_id = await self.installations.get(repo)
        scope = TokenScope.of(installation_id, repo, permissions)

        async def token() -> str:
            return await self._token(repo, scope)

        def forget() -> None:
            self.tokens.forget(scope)

        return Credential("token", token, pace_key=installation_id, forget=forget)

    async def request(
        self,
        method: str,
        repo: str,
        path: str,
        *,
        payload: Any = None,
        params: dict[str, str] | None = None,
    ) -> Response:
        """A call as `repo`'s installation, with a token for `repo` alone and the least
        permission the call needs; `path` is relative to the repository URL."""
        return await self.transport.request(
            method,
            repo_path(repo) + path,
            credential=await self._repo_credential(repo, needed_permissions(method, path)),
            payload=payload,
            params=params,
        )

    async def get(self, repo: str, path: str, kind: type[T]) -> T:
        """GET `path` (relative to the repository URL), its answer read as `kind`."""
        return record(kind, (await self.request("GET", repo, path)).data)

    async def paginate(
        self,
        repo: str,
        path: str,
        kind: type[T],
        *,
        params: dict[str, str] | None = None,
        key: str | None = None,
    ) -> list[T]:
        """Every item of a list endpoint as `kind`, following `Link: rel="next"`. `key`:
        the list is that field of an object answer (`check_runs`, `jobs`)."""
        credential = await self._repo_credential(repo, needed_permissions("GET", path))
        query = {"per_page": str(PER_PAGE), **(params or {})}
        response = await self.transport.request(
            "GET", repo_path(repo) + path, credential=credential, params=query
        )
        items = _page(kind, response.data, key)
        pages = 1
        while response.next_url is not None and pages < MAX_PAGES:
            next_url = response.next_url
            if not _within(next_url, self.transport.base_url):
                # The token goes only to the API it was issued for, never to a Link's host.
                log.warning("github: %s%s: next page leaves the API; not followed", repo, path)
                raise GitHubRejected(
                    "GitHub's next-page link points outside the API base URL; not followed",
                    detail=ErrorDetail(base_url=self.transport.base_url),
                )
            response = await self.transport.request("GET", next_url, credential=credential)
            items.extend(_page(kind, response.data, key))
            pages += 1
        return items

    # -- Issues, labels, comments ---------------------------------------------------------

    async def create_issue(
        self, repo: str, *, title: str, body: str, labels: list[str] | tuple[str, ...] = ()
    ) -> Issue:
        payload = {"title": title, "body": body, "labels": list(labels)}

        async def made_already() -> Issue | None:
            login = (await self.identity()).bot_login
            recent = await self.request(
                "GET",
                repo,
                "/issues",
                params={
                    "creator": login,
                    "state": "all",
                    "sort": "created",
                    "direction": "desc",
                    "per_page": str(RECONCILE_WINDOW),
                },
            )
            for issue in records(Issue, recent.data):
                if issue.title == title and (issue.body or "") == body:
                    return issue
            return None

        return await self._create(repo, "/issues", payload, Issue, made_already)

    async def get_repo(self, repo: str) -> Repository:
        """The repository (`clone_url`, `default_branch`)."""
        return await self.get(repo, "", Repository)

    async def get_issue(self, repo: str, number: int) -> Issue:
        return await self.get(repo, f"/issues/{int(number)}", Issue)

    async def update_issue(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
    ) -> Issue:
        fields = {"title": title, "body": body, "state": state}
        payload = {key: value for key, value in fields.items() if value is not None}
        response = await self.request("PATCH", repo, f"/issues/{int(number)}", payload=payload)
        return record(Issue, response.data)

    async def list_issues(
        self, repo: str, *, state: str = "open", labels: list[str] | tuple[str, ...] = ()
    ) -> list[Issue]:
        """Issues (and pull requests, as GitHub lists them) of `repo`, all pages."""
        params = {"state": state}
        if labels:
            params["labels"] = ",".join(labels)
        return await self.paginate(repo, "/issues", Issue, params=params)

    async def add_labels(
        self, repo: str, number: int, labels: list[str] | tuple[str, ...]
    ) -> list[Label]:
        """Adds labels (creating unknown ones, as GitHub does); returns all the issue's labels."""
        response = await self.request(
            "POST", repo, f"/issues/{int(number)}/labels", payload={"labels": list(labels)}
        )
        return records(Label, response.data)

    async def remove_label(self, repo: str, number: int, label: str) -> bool:
        """True when the label was removed, False when the issue did not carry it."""
        try:
            await self.request(
                "DELETE", repo, f"/issues/{int(number)}/labels/{quote(label, safe='')}"
            )
        except GitHubNotFound as exc:
            if exc.message == LABEL_MISSING_MESSAGE:
                return False
            raise
        return True

    async def create_comment(self, repo: str, number: int, body: str) -> IssueComment:
        async def made_already() -> IssueComment | None:
            login = (await self.identity()).bot_login
            for comment in reversed(await self.list_comments(repo, number)):  # newest first
                if comment.body == body and comment.author == login:
                    return comment
            return None

        path = f"/issues/{int(number)}/comments"
        return await self._create(repo, path, {"body": body}, IssueComment, made_already)

    async def update_comment(self, repo: str, comment_id: int, body: str) -> IssueComment:
        response = await self.request(
            "PATCH", repo, f"/issues/comments/{int(comment_id)}", payload={"body": body}
        )
        return record(IssueComment, response.data)

    async def list_comments(self, repo: str, number: int) -> list[IssueComment]:
        return await self.paginate(repo, f"/issues/{int(number)}/comments", IssueComment)

    # -- Pull requests and permissions ----------------------------------------------------

    async def create_pull(
        self, repo: str, *, title: str, head: str, base: str, body: str, draft: bool = False
    ) -> PullRequest:
        payload: dict[str, Any] = {"title": title, "head": head, "base": base, "body": body}
        if draft:
            payload["draft"] = True

        async def made_already() -> PullRequest | None:
            existing = await self.list_pulls(repo, head=head, state="open")
            return existing[0] if existing else None

        return await self._create(repo, "/pulls", payload, PullRequest, made_already)

    async def get_pull(self, repo: str, number: int) -> PullRequest:
        return await self.get(repo, f"/pulls/{int(number)}", PullRequest)

    async def list_pulls(
        self, repo: str, *, head: str | None = None, state: str = "open", base: str | None = None
    ) -> list[PullRequest]:
        """`head` is "owner:branch" as GitHub filters it; a bare branch gets the repo owner.
        `base`: only pull requests into that branch."""
        params = {"state": state}
        if head is not None:
            params["head"] = head if ":" in head else f"{split_repo(repo)[0]}:{head}"
        if base is not None:
            params["base"] = base
        return await self.paginate(repo, "/pulls", PullRequest, params=params)

    async def collaborator_permission(self, repo: str, username: str) -> str:
        """ "admin", "write", "read" or "none" (GitHub's legacy `permission` field, which
        folds maintain into write and triage into read)."""
        try:
            response = await self.request(
                "GET", repo, f"/collaborators/{quote(username, safe='')}/permission"
            )
        except GitHubNotFound:
            return "none"
        permission = record(CollaboratorPermission, response.data).permission
        return permission if permission in PERMISSIONS else "none"

    async def request_redirect(self, repo: str, path: str) -> Response:
        """GET an endpoint GitHub answers with a redirect, answered as it is (not
        followed, so the token stays with the API)."""
        response = await self.transport.request(
            "GET",
            repo_path(repo) + path,
            credential=await self._repo_credential(repo, needed_permissions("GET", path)),
            follow_redirects=False,
        )
        if "Location" not in response.headers:
            raise GitHubRejected(f"GitHub did not redirect GET {path}")
        return response

    # -- Creates that survive a 5xx ------------------------------------------------------

    async def _create(
        self,
        repo: str,
        path: str,
        payload: dict[str, Any],
        kind: type[T],
        made_already: Callable[[], Awaitable[T | None]],
    ) -> T:
        """POST; if GitHub fails with 5xx (it can do so after acting), look for what the
        POST would have made before sending it again, so a retry never doubles it."""
        policy = self.transport.retry
        for attempt in range(1, policy.max_attempts + 1):
            try:
                response = await self.transport.request(
                    "POST",
                    repo_path(repo) + path,
                    credential=await self._repo_credential(repo, needed_permissions("POST", path)),
                    payload=payload,
                    retry_server_errors=False,
                )
                return record(kind, response.data)
            except GitHubUnavailable:
                if attempt >= policy.max_attempts:
                    raise
            await self._sleep(server_error_wait({}, attempt=attempt, policy=policy))
            try:
                found = await made_already()
            except GitHubError:
                found = None
            if found is not None:
                log.info("github: POST %s on %s had succeeded despite the 5xx", path, repo)
                return found
        raise AssertionError("unreachable: the last attempt returns or raises")


def _page(kind: type[T], data: Any, key: str | None) -> list[T]:
    """One page of a list answer as `kind` (the list is `data[key]` when `key` is given)."""
    found = data.get(key) if key is not None and isinstance(data, dict) else data
    if not isinstance(found, list):
        raise GitHubRejected("GitHub's list answer is not a list")
    return records(kind, found)


def _within(url: str, base_url: str) -> bool:
    """`url` is relative, or on the base URL's scheme, host and port and under its path."""
    if not url.startswith(("http://", "https://")):
        return url.startswith("/")
    target, base = urlsplit(url), urlsplit(base_url)
    if (target.scheme, target.netloc.lower()) != (base.scheme, base.netloc.lower()):
        return False
    prefix = base.path.rstrip("/")
    return target.path == prefix or target.path.startswith(prefix + "/")
