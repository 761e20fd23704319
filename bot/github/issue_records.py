"""Typed records of what GitHub answers about issues, their comments and labels, the
repository and its pull requests: only the fields Steelframe reads, each one GitHub's OpenAPI
description gives the operation's answer (tests/test_github_records.py holds them to it).
Decoded with `bot.github.records.record`, like the records of the work after the PR."""

from __future__ import annotations

import msgspec

from bot.github.records import GitHubUser, PullRef


class Label(msgspec.Struct, frozen=True):
    # Required in the label list GitHub answers when labels are added; an issue's labels
    # may leave it out (its description), so it defaults to no name.
    name: str = ""


class PullRequestMark(msgspec.Struct, frozen=True):
    """Present on an issue that is a pull request (GitHub lists both as issues)."""


class Issue(msgspec.Struct, frozen=True):
    number: int
    title: str
    state: str  # "open" | "closed"
    html_url: str
    user: GitHubUser | None
    # An issue's labels are objects, or bare names in GitHub's description.
    labels: tuple[Label | str, ...] = ()
    body: str | None = None
    pull_request: PullRequestMark | None = None

    @property
    def label_names(self) -> list[str]:
        return [label if isinstance(label, str) else label.name for label in self.labels]

    @property
    def is_pull(self) -> bool:
        return self.pull_request is not None

    @property
    def author(self) -> str:
        return self.user.login if self.user is not None else ""


class IssueComment(msgspec.Struct, frozen=True):
    """A comment on an issue or on a pull request's conversation."""

    id: int
    html_url: str
    created_at: str
    user: GitHubUser | None
    body: str = ""  # GitHub's description does not promise one

    @property
    def author(self) -> str:
        return self.user.login if self.user is not None else ""


class Repository(msgspec.Struct, frozen=True):
    full_name: str
    clone_url: str
    default_branch: str


class PullRequest(msgspec.Struct, frozen=True):
    """A pull request as GitHub answers it when opened, read or listed (a list holds the
    "simple" form, whose user may be null)."""

    number: int
    state: str  # "open" | "closed" (a merged one is closed, with `merged_at`)
    title: str
    html_url: str
    head: PullRef
    base: PullRef
    user: GitHubUser | None
    merged_at: str | None = None
    draft: bool = False

    @property
    def shown_state(self) -> str:
        """ "open", "closed" or "merged": what a person calls the pull request's state."""
        return "merged" if self.merged_at else self.state

    @property
    def author(self) -> str:
        return self.user.login if self.user is not None else ""
