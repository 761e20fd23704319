"""The sandbox's world in memory: the App, users, installations, repositories and their
issues, labels, comments and pull requests. Plain data; the rules live in `operations`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# How much each repository role may do, for comparisons ("write or more").
PERMISSION_RANK = {"none": 0, "read": 1, "triage": 1, "write": 2, "maintain": 2, "admin": 3}


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class User:
    id: int
    login: str
    type: str = "User"  # "User" | "Bot" | "Organization"


@dataclass
class AppInfo:
    id: int
    slug: str
    name: str
    owner: User
    bot: User
    public_key_pem: str
    created_at: float
    events: tuple[str, ...] = (
        "issues",
        "issue_comment",
        "pull_request",
    )
    permissions: dict[str, str] = field(
        default_factory=lambda: {
            "contents": "write",
            "issues": "write",
            "metadata": "read",
            "pull_requests": "write",
        }
    )


@dataclass
class Label:
    id: int
    name: str
    color: str = "ededed"
    description: str | None = None
    default: bool = False


@dataclass
class Comment:
    id: int
    issue_number: int
    user: User
    body: str
    created_at: float
    updated_at: float


@dataclass
class Issue:
    id: int
    number: int
    title: str
    body: str | None
    user: User
    created_at: float
    updated_at: float
    labels: list[str] = field(default_factory=list)  # label names, in the order added
    state: str = "open"
    state_reason: str | None = None
    closed_at: float | None = None
    comment_ids: list[int] = field(default_factory=list)
    is_pull: bool = False


@dataclass
class Pull:
    id: int
    number: int
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    draft: bool = False
    merged_at: float | None = None
    merge_commit_sha: str | None = None
    merged_by: User | None = None


@dataclass
class Repo:
    id: int
    owner: User
    name: str
    created_at: float
    default_branch: str = "main"
    private: bool = False
    installation_id: int | None = None
    git_path: Path | None = None
    labels: dict[str, Label] = field(default_factory=dict)  # by lower-case name
    issues: dict[int, Issue] = field(default_factory=dict)
    pulls: dict[int, Pull] = field(default_factory=dict)
    comments: dict[int, Comment] = field(default_factory=dict)
    collaborators: dict[str, str] = field(default_factory=dict)  # lower login -> permission
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner.login}/{self.name}"


@dataclass
class Installation:
    id: int
    account: User
    created_at: float
    repos: set[str] = field(default_factory=set)  # lower-case full names
    suspended_at: float | None = None


@dataclass
class IssuedToken:
    installation_id: int
    expires_at: float


@dataclass
class World:
    """Everything the sandbox knows. Ids come from one counter, as unique as GitHub's."""

    app: AppInfo
    clock: Callable[[], float] = time.time
    users: dict[str, User] = field(default_factory=dict)  # by lower-case login
    installations: dict[int, Installation] = field(default_factory=dict)
    repos: dict[str, Repo] = field(default_factory=dict)  # by lower-case full name
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    user_tokens: dict[str, str] = field(default_factory=dict)  # token -> lower login
    last_id: int = 100_000

    def next_id(self) -> int:
        self.last_id += 1
        return self.last_id

    def now(self) -> float:
        return self.clock()

    def repo(self, full_name: str) -> Repo | None:
        return self.repos.get(full_name.lower())

    def user(self, login: str, *, kind: str = "User") -> User:
        """The user with this login, created on first mention (GitHub users just exist)."""
        found = self.users.get(login.lower())
        if found is None:
            found = self.users[login.lower()] = User(self.next_id(), login, kind)
        return found
