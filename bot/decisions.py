"""Publishing a Decision: one marker-tagged comment on the issue, through the GitHub App.

The comment carries `<!-- steelframe-decision -->` exactly once (it resumes a task waiting
for info, even when the App wrote it) and `steelframe:needs_human` is removed. A publish is
idempotent by the client's key (an `Idempotency-Key` header or a `request_id`), never by its
text: a retry or a double click with the same key answers the first comment, while the same
words published again under a new key (a second question answered "Yes, proceed") post
again and resume the task again. A key names one Decision: other words under a used key are
refused (KeyReused, 422) and post nothing, whether the key's publish succeeded, runs or
failed. A publish that failed after GitHub stored the comment is reconciled by its key
marker.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Protocol

import msgspec
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.contracts import actions
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.errors import BadRequest
from bot.github.errors import GitHubNotFound
from bot.github.issue_records import Issue, IssueComment
from bot.github.records import MAX_BODY
from bot.idempotency import EffectKind, check_same_request, completed, run_once
from bot.models import Operator

DECISION_MARKER = "<!-- steelframe-decision -->"
NEEDS_HUMAN_LABEL = "steelframe:needs_human"
_MARKER_RE = re.compile(r"\s*<!--\s*steelframe-decision\s*-->\s*", re.IGNORECASE)
_HTML_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)


# Before the line that names who published: what follows is not part of the Decision.
SIGNATURE_MARKER = "<!-- steelframe-signature -->"


def decision_text(comment_body: str) -> str:
    """What a Decision comment says, without its markers or its signature line (what the
    coding runtime is told)."""
    said = comment_body.split(SIGNATURE_MARKER, 1)[0]
    return _HTML_COMMENT_RE.sub("", said).strip()


class CommentApi(Protocol):
    async def create_comment(self, repo: str, number: int, body: str) -> IssueComment: ...

    async def list_comments(self, repo: str, number: int) -> list[IssueComment]: ...

    async def get_issue(self, repo: str, number: int) -> Issue: ...

    async def remove_label(self, repo: str, number: int, label: str) -> bool: ...

    async def is_app_login(self, login: str) -> bool: ...


class CommentRequest(msgspec.Struct, frozen=True):
    """What a `publish_decision` side effect posts (its row's `request`, bot/idempotency.py).
    Field order is the stored JSON's key order, as rows written before this type have it."""

    repo: str
    issue: int
    body: str  # ends with the publish's key marker: how a retry finds the comment


class CommentRef(msgspec.Struct, frozen=True):
    """The comment a `publish_decision` side effect posted or found (its row's `result`)."""

    comment_id: int
    comment_url: str


@dataclass(frozen=True)
class Published:
    issue: int
    comment_id: int
    comment_url: str
    reused: bool

    def as_response(self) -> actions.Published:
        return actions.Published(
            published=True,
            issue=self.issue,
            comment_id=self.comment_id,
            comment_url=self.comment_url,
        )


def decision_comment(body: str, key: str, *, by: str | None = None) -> str:
    """The operator's text with the decision marker exactly once (pasted copies removed),
    signed with the name of the operator who published it (`by`), when known."""
    text = _MARKER_RE.sub("\n", body).strip()
    if not text:
        raise BadRequest("body is required", detail=ErrorDetail(field="body"))
    signed = ""
    if by:
        name = re.sub(r"[`\s]+", " ", by).strip()
        signed = f"\n\n{SIGNATURE_MARKER}\n— published by operator `{name}` via Steelframe"
    comment = f"{DECISION_MARKER}\n{text}{signed}\n\n<!-- steelframe-publish:{key} -->"
    if len(comment) > MAX_BODY:  # GitHub refuses it: said now, before the key is spent
        room = MAX_BODY - (len(comment) - len(text))
        raise BadRequest(
            f"body is too long: GitHub takes {MAX_BODY} characters in a comment, and with "
            f"Steelframe's marker and signature a Decision may have {room}",
            detail=ErrorDetail(field="body"),
        )
    return comment


def publish_key(operator_id: int, repo: str, issue: int, request_key: str | None) -> str:
    """The side-effect key of one publish: the client's key (scoped to the operator and the
    issue), or a fresh one when the client sent none (each such request is a new publish)."""
    client = request_key if request_key is not None else f"fresh:{uuid.uuid4().hex}"
    digest = hashlib.sha256(f"{operator_id}\x1f{repo}\x1f{issue}\x1f{client}".encode())
    return f"publish:{digest.hexdigest()[:40]}"


class DecisionPublisher:
    def __init__(self, *, db: Database, github: CommentApi, clock: Clock = utcnow) -> None:
        self.db = db
        self.github = github
        self.clock = clock

    async def publish(
        self,
        repo: str,
        issue: int,
        body: str,
        *,
        operator_id: int,
        request_key: str | None = None,
    ) -> Published:
        """Post the Decision once per `request_key` (None: this call is a publish of its own);
        another Decision under a key used before is refused (KeyReused, 422), nothing posted."""
        key = publish_key(operator_id, repo, issue, request_key)
        name = await self.db.run(_operator_name, operator_id)
        comment = decision_comment(body, key.removeprefix("publish:"), by=name)
        await self._require_issue(repo, issue)

        async def post(req: CommentRequest) -> CommentRef:
            created = await self.github.create_comment(req.repo, req.issue, req.body)
            return CommentRef(comment_id=created.id, comment_url=created.html_url)

        async def find(req: CommentRequest) -> CommentRef | None:
            needle = f"<!-- steelframe-publish:{key.removeprefix('publish:')} -->"
            for existing in await self.github.list_comments(req.repo, req.issue):
                # Only the App's own comment counts: anyone can type the marker.
                if needle in existing.body and await self.github.is_app_login(existing.author):
                    return CommentRef(comment_id=existing.id, comment_url=existing.html_url)
            return None

        def same_decision(first: CommentRequest) -> None:
            # The Decision's words, not the comment: its signature names the operator as
            # named now, and HTML comments (markers) say nothing.
            check_same_request(decision_text(first.body), decision_text(comment), what="Decision")

        outcome = await run_once(
            self.db,
            key=key,
            kind=EffectKind.PUBLISH_DECISION,
            request=CommentRequest(repo=repo, issue=issue, body=comment),
            perform=post,
            reconcile=find,
            result_type=CommentRef,
            check_stored=same_decision,
            clock=self.clock,
        )
        # Idempotent by nature: removing a label that is gone is a no-op.
        await self.github.remove_label(repo, issue, NEEDS_HUMAN_LABEL)
        return Published(
            issue=issue,
            comment_id=outcome.result.comment_id,
            comment_url=outcome.result.comment_url,
            reused=outcome.reused,
        )

    async def published(
        self, repo: str, issue: int, *, operator_id: int, request_key: str
    ) -> Published | None:
        """The Decision a finished publish under `request_key` posted (`reused`), or None
        (no publish under it yet, or one that has not finished)."""
        key = publish_key(operator_id, repo, issue, request_key)
        done = await self.db.run(completed, key, CommentRef)
        if done is None:
            return None
        return Published(issue, done.comment_id, done.comment_url, reused=True)

    async def _require_issue(self, repo: str, issue: int) -> None:
        """404 when the issue does not exist, before anything is stored: named, with
        GitHub's words after (its bare "Not Found" was all a client could show)."""
        try:
            await self.github.get_issue(repo, issue)
        except GitHubNotFound as exc:
            raise GitHubNotFound(
                f"issue #{issue} not found in {repo} (GitHub: {exc.message})",
                github_status=exc.github_status,
                request_id=exc.request_id,
                detail=ErrorDetail(
                    field="issue",
                    repo=repo,
                    github_status=exc.github_status,
                    github_request_id=exc.request_id,
                ),
            ) from exc


def _operator_name(session: Session, operator_id: int) -> str | None:
    operator = session.get(Operator, operator_id)
    return operator.name if operator is not None else None
