"""Typed records of what GitHub answers after a pull request opens: reviews, review
comments, reactions, check runs and annotations, commit statuses, Actions runs, jobs and
logs, changed files and merges (issues, comments, labels, repositories and pull requests
themselves are in `bot.github.issue_records`). msgspec reads only the fields named here
from GitHub's JSON (the rest is ignored), so a record is what Steelframe relies on, and
nothing else of GitHub's answer crosses into the bot. Every field is one GitHub's OpenAPI
description gives the operation's answer, and for `Review` and `ReviewComment`, also read
from webhook payloads, one the payload's JSON Schema gives it (tests/test_github_records.py
holds them to both)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from bot.github.errors import GitHubRejected

T = TypeVar("T")
# GitHub's limit on the body of an issue, a pull request or a comment (characters): past it,
# a write is refused (422) and whatever made it would be retried in vain.
MAX_BODY = 65_536


class GitHubUser(msgspec.Struct, frozen=True):
    login: str
    id: int
    type: str = "User"  # "User" | "Bot" | "Organization"


class Reaction(msgspec.Struct, frozen=True):
    id: int
    content: str
    user: GitHubUser | None = None


class Review(msgspec.Struct, frozen=True):
    id: int
    state: str  # "APPROVED" | "CHANGES_REQUESTED" | "COMMENTED" | "DISMISSED" | "PENDING"
    user: GitHubUser | None
    body: str | None = None
    commit_id: str | None = None
    submitted_at: str | None = None
    html_url: str = ""


class ReviewComment(msgspec.Struct, frozen=True):
    """A comment on a line of the diff; a reply names its thread's first comment in
    `in_reply_to_id`."""

    id: int
    body: str
    path: str
    user: GitHubUser | None
    commit_id: str
    pull_request_review_id: int | None = None
    line: int | None = None
    start_line: int | None = None
    side: str | None = None
    in_reply_to_id: int | None = None
    diff_hunk: str = ""
    html_url: str = ""
    created_at: str = ""
    updated_at: str = ""  # when its text last changed (ISO 8601)

    @property
    def thread_id(self) -> int:
        """The id of the comment that opened this comment's thread."""
        return self.in_reply_to_id or self.id

    @property
    def changed_at(self) -> datetime | None:
        """`updated_at` as a time; None when GitHub sent none."""
        try:
            return datetime.fromisoformat(self.updated_at)
        except ValueError:
            return None


class Annotation(msgspec.Struct, frozen=True):
    path: str
    start_line: int
    end_line: int
    annotation_level: str | None  # "notice" | "warning" | "failure"
    message: str | None
    title: str | None = None
    raw_details: str | None = None


class CheckRunOutput(msgspec.Struct, frozen=True):
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations_count: int = 0


class AppRef(msgspec.Struct, frozen=True):
    id: int
    name: str
    slug: str | None = None


class CheckRun(msgspec.Struct, frozen=True):
    id: int
    name: str
    head_sha: str
    status: str  # "queued" | "in_progress" | "completed" | ...
    conclusion: str | None
    output: CheckRunOutput
    html_url: str | None = None
    details_url: str | None = None
    app: AppRef | None = None


class CommitStatus(msgspec.Struct, frozen=True):
    context: str
    state: str  # "error" | "failure" | "pending" | "success"
    description: str | None = None
    target_url: str | None = None


class CombinedStatus(msgspec.Struct, frozen=True):
    state: str  # "failure" if any context failed or errored, "pending", else "success"
    sha: str
    total_count: int
    statuses: list[CommitStatus]


class WorkflowRun(msgspec.Struct, frozen=True):
    id: int
    head_sha: str
    run_number: int
    event: str
    status: str | None
    conclusion: str | None
    html_url: str
    name: str | None = None
    head_branch: str | None = None


class Job(msgspec.Struct, frozen=True):
    id: int
    run_id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    html_url: str | None = None


@dataclass(frozen=True)
class JobLog:
    """A job's log as plain text: its last `max_bytes` when it was longer (`truncated`);
    the failure is at the end."""

    job_id: int
    text: str
    truncated: bool


class PullFile(msgspec.Struct, frozen=True):
    filename: str
    status: str  # "added" | "removed" | "modified" | "renamed" | ...
    additions: int
    deletions: int
    changes: int
    patch: str | None = None
    previous_filename: str | None = None


class RepoRef(msgspec.Struct, frozen=True):
    full_name: str  # "owner/name"


class PullRef(msgspec.Struct, frozen=True):
    """A pull request's head or base: the branch, its commit and its repository (None when
    a fork was deleted, though the description says it is always there)."""

    ref: str
    sha: str
    repo: RepoRef | None = None


class MergeState(msgspec.Struct, frozen=True):
    """Where a pull request stands on its way to merging (from `GET .../pulls/{n}`)."""

    number: int
    state: str  # "open" | "closed"
    merged: bool
    mergeable: bool | None
    mergeable_state: str
    head: PullRef
    base: PullRef
    merge_commit_sha: str | None = None
    merged_by: GitHubUser | None = None


class MergeResult(msgspec.Struct, frozen=True):
    sha: str
    merged: bool
    message: str


def record(kind: type[T], data: Any) -> T:
    """GitHub's JSON as `kind`; GitHubRejected if a field Steelframe relies on is missing
    or of the wrong type (GitHub answered something else than its description says)."""
    try:
        return msgspec.convert(data, type=kind, strict=False)
    except msgspec.ValidationError as exc:
        raise GitHubRejected(f"GitHub's answer is not a {kind.__name__}: {exc}") from exc


def records(kind: type[T], items: Any) -> list[T]:
    if not isinstance(items, list):
        raise GitHubRejected(f"GitHub's answer is not a list of {kind.__name__}")
    return [record(kind, item) for item in items]
