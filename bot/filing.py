"""Filing work from Chat as labelled GitHub issues, once per key, and starting their tasks.

The issue body carries `<!-- steelframe-filing:KEY -->`; a filing interrupted after GitHub
made the issue (a crash, a 5xx after the write) is reconciled by finding that marker among
the repository's recent Steelframe issues before anything is created again.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import msgspec

from bot.clock import Clock, utcnow
from bot.contracts.actions import Filed
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.dialogue.titles import issue_title
from bot.errors import BadRequest
from bot.filing_source import FilingClient, current_client, source_label_of
from bot.github.issue_records import Issue
from bot.github.records import MAX_BODY
from bot.idempotency import EffectKind, run_once
from memory.secrets import masked

log = logging.getLogger(__name__)
FROM_TUI_LABEL = FilingClient.TUI.label  # one of the `from-*` labels (bot/filing_source.py)
MEMORY_LABEL = "steelframe:memory"


class FilingKind(StrEnum):
    WORK = "work"
    MEMORY = "memory"


class IssueApi(Protocol):
    """The slice of bot.github.client.GitHubClient that filing needs."""

    async def create_issue(
        self, repo: str, *, title: str, body: str, labels: list[str]
    ) -> Issue: ...

    async def list_issues(
        self, repo: str, *, state: str = "open", labels: list[str] | tuple[str, ...] = ()
    ) -> list[Issue]: ...

    async def is_app_login(self, login: str) -> bool: ...


class TaskStarter(Protocol):
    async def pickup(
        self,
        repo: str,
        issue: int,
        *,
        title: str,
        body: str | None,
        origin_session: str | None,
        cause: str,
    ) -> object: ...


class IssueRequest(msgspec.Struct, frozen=True):
    """What a `file_issue` side effect creates (its row's `request`, bot/idempotency.py).
    Field order is the stored JSON's key order, as rows written before this type have it."""

    repo: str
    title: str
    body: str  # ends with the filing's marker: how a retry finds the issue
    labels: list[str]


class IssueRef(msgspec.Struct, frozen=True):
    """The issue a `file_issue` side effect made or found (its row's `result`)."""

    number: int
    url: str


@dataclass(frozen=True)
class FiledIssue:
    number: int
    url: str
    task_started: bool
    reused: bool

    def as_response(self) -> Filed:
        return Filed(
            filed_issue_number=self.number,
            filed_issue_url=self.url,
            filed_task_started=self.task_started,
        )


# A memory issue says what its worker does (bot/lifecycle/memory_task.py): the fact sits
# above this line, the instructions below it; the worker writes only the fact.
MEMORY_SEPARATOR = "<!-- steelframe-memory-fact-end -->"
MEMORY_DIR = "docs/memory"
_SLUG = re.compile(r"[^a-z0-9]+")


def memory_path(title: str) -> str:
    """Where a memory titled `title` is written: `docs/memory/<slug>.md`, from the title
    alone (never from text in the issue), so the worker cannot be steered elsewhere."""
    words = title.lower().removeprefix("remember:").strip()
    slug = _SLUG.sub("-", words).strip("-")[:60].strip("-") or "memory"
    return f"{MEMORY_DIR}/{slug}.md"


def memory_issue_body(title: str, fact: str) -> str:
    """The body of a `steelframe:memory` issue: the fact, then what closes the issue."""
    return (
        f"{fact.strip()}\n\n{MEMORY_SEPARATOR}\n---\n"
        "**Committed memory.** Steelframe's worker closes this issue: it writes the fact above, "
        f"unchanged, to `{memory_path(title)}` and opens a pull request that fixes this issue. "
        "Once the pull request is merged, Chat reads the fact as committed memory, which "
        "outranks retrieved context."
    )


def memory_fact(body: str) -> str:
    """The fact of a memory issue's body (everything above the separator), without markers."""
    fact = body.split(MEMORY_SEPARATOR, 1)[0]
    return re.sub(r"<!--.*?-->", "", fact, flags=re.DOTALL).strip()


def filing_key(*parts: object) -> str:
    return "filing:" + hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:40]


def marker(key: str) -> str:
    return f"<!-- steelframe-filing:{key.removeprefix('filing:')} -->"


class FilingService:
    def __init__(
        self,
        *,
        db: Database,
        github: IssueApi,
        tasks: TaskStarter | None,
        pickup_labels: tuple[str, ...],
        clock: Clock = utcnow,
    ) -> None:
        self.db = db
        self.github = github
        self.tasks = tasks
        self.pickup_labels = pickup_labels
        self.clock = clock

    def labels_for(self, kind: FilingKind) -> list[str]:
        labels = [*self.pickup_labels, current_client().label]
        if kind is FilingKind.MEMORY:
            labels.append(MEMORY_LABEL)
        return labels

    async def file(
        self,
        *,
        key: str,
        repo: str,
        title: str,
        body: str,
        kind: FilingKind = FilingKind.WORK,
        origin_session: str | None = None,
    ) -> FiledIssue:
        """File once per key; a repeat returns the same issue. Starting the task is
        idempotent on the lifecycle side (a second pickup of a live task does nothing).
        Token-shaped text in the title or body is masked: an issue is public, and "remember
        that the deploy token is ghp_..." filed the token in clear."""
        title, body = issue_title(masked(title)), masked(body)
        if not title:
            raise BadRequest("an issue needs a title", detail=ErrorDetail(field="title"))
        if kind is FilingKind.MEMORY:
            body = memory_issue_body(title, body or title)
        request = IssueRequest(
            repo=repo,
            title=title,
            body=f"{body.rstrip()}\n\n{marker(key)}".lstrip(),
            labels=self.labels_for(kind),
        )
        if len(request.body) > MAX_BODY:  # GitHub refuses it: said now, the key unspent
            room = MAX_BODY - (len(request.body) - len(body.rstrip()))
            raise BadRequest(
                f"body is too long: GitHub takes {MAX_BODY} characters in an issue, and with "
                f"Steelframe's marker the body may have {room}",
                detail=ErrorDetail(field="body"),
            )

        async def find(req: IssueRequest) -> IssueRef | None:
            return await self._find_filed(req.repo, marker(key), source_label_of(req.labels))

        outcome = await run_once(
            self.db,
            key=key,
            kind=EffectKind.FILE_ISSUE,
            request=request,
            perform=self._create,
            reconcile=find,
            result_type=IssueRef,
            # The key names the filing (its title, proposal or turn): a repeat answers its
            # issue whatever body or client label it brings (docs/api.md, "File").
            check_stored=None,
            clock=self.clock,
        )
        number, url = outcome.result.number, outcome.result.url
        started = await self._start_task(repo, number, title, request.body, origin_session, kind)
        log.info("filed %s#%s (key %s, reused=%s)", repo, number, key, outcome.reused)
        return FiledIssue(number, url, started, outcome.reused)

    async def _create(self, req: IssueRequest) -> IssueRef:
        issue = await self.github.create_issue(
            req.repo, title=req.title, body=req.body, labels=req.labels
        )
        return IssueRef(number=issue.number, url=issue.html_url)

    async def _find_filed(self, repo: str, needle: str, label: str) -> IssueRef | None:
        """The issue an earlier attempt filed (after a crash between create and record)."""
        for issue in await self.github.list_issues(repo, state="all", labels=[label]):
            # Only an issue the App opened counts: anyone can type the marker.
            if needle in (issue.body or "") and await self.github.is_app_login(issue.author):
                return IssueRef(number=issue.number, url=issue.html_url)
        return None

    async def _start_task(
        self,
        repo: str,
        number: int,
        title: str,
        body: str,
        origin_session: str | None,
        kind: FilingKind,
    ) -> bool:
        if self.tasks is None:
            return False
        try:
            await self.tasks.pickup(
                repo,
                number,
                title=title,
                body=body,  # the text the task works from (pinned)
                origin_session=origin_session,
                cause=f"chat:{kind}",
            )
        except Exception as exc:
            # The issue exists: report it filed (so nobody files it again) with its task not
            # started; the pickup label lets the reconciler or a redelivery start it.
            log.warning("filed %s#%s but its task did not start: %s", repo, number, exc)
            return False
        return True
