"""The sandbox's world in memory: the App, users, installations, repositories and their
issues, labels, comments and pull requests. Plain data; the rules live in `operations`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path

from github_sandbox.git import MergeCheck

# How much each repository role may do, for comparisons ("write or more").
PERMISSION_RANK = {"none": 0, "read": 1, "triage": 1, "write": 2, "maintain": 2, "admin": 3}


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Upgradable:
    """A dataclass whose pickled form from an older sandbox (`steelframe dev` keeps its
    world on disk) gains the fields added since, with their defaults."""

    def __setstate__(self, state: dict[str, object]) -> None:
        for item in fields(self):  # type: ignore[arg-type]
            if item.name in state:
                continue
            if item.default_factory is not MISSING:
                state[item.name] = item.default_factory()
            elif item.default is not MISSING:
                state[item.name] = item.default
        self.__dict__.update(state)


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
        "pull_request_review",
        "pull_request_review_comment",
        "check_run",
        "check_suite",
        "status",
        "workflow_run",
        "workflow_job",
    )
    permissions: dict[str, str] = field(
        default_factory=lambda: {
            "contents": "write",
            "issues": "write",
            "metadata": "read",
            "pull_requests": "write",
            # Reading CI: check runs, commit statuses and Actions runs and their logs.
            "checks": "write",
            "statuses": "read",
            "actions": "read",
        }
    )
    # An App registered through the manifest flow keeps its own webhook (the sandbox's first
    # App is pointed by the control API or `steelframe dev`, so these stay None for it).
    hook_url: str | None = None
    hook_secret: str | None = None


@dataclass
class Label:
    id: int
    name: str
    color: str = "ededed"
    description: str | None = None
    default: bool = False


@dataclass
class Reaction:
    id: int
    user: User
    content: str  # "+1" | "-1" | "laugh" | "confused" | "heart" | "hooray" | "rocket" | "eyes"
    created_at: float


@dataclass
class Comment(Upgradable):
    id: int
    issue_number: int
    user: User
    body: str
    created_at: float
    updated_at: float
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Milestone:
    id: int
    number: int
    title: str
    creator: User
    created_at: float


@dataclass
class Issue(Upgradable):
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
    # What `list_issues` filters on too (`issue_filters`): assignees as create and update
    # set them (`assignees`); milestone and type only as the world was seeded.
    assignees: list[User] = field(default_factory=list)
    milestone: Milestone | None = None
    issue_type: str | None = None  # the issue type's name


@dataclass
class Pull(Upgradable):
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
    requested_reviewers: list[User] = field(default_factory=list)
    # GitHub's test merge of the head into the base, for the tips it was made at
    # (github_sandbox.mergeability); None until a read of the pull request asks for one.
    merge_check: MergeCheck | None = None


@dataclass
class Review:
    id: int
    pull_number: int
    user: User
    body: str | None
    state: str  # "APPROVED" | "CHANGES_REQUESTED" | "COMMENTED" | "PENDING" | "DISMISSED"
    commit_id: str
    submitted_at: float
    comment_ids: list[int] = field(default_factory=list)


@dataclass
class ReviewComment:
    """A comment on a line of a pull request's diff; a reply names the thread's first
    comment in `in_reply_to_id` and repeats its place."""

    id: int
    pull_number: int
    review_id: int
    user: User
    body: str
    path: str
    line: int
    side: str  # "RIGHT" (the head's lines) | "LEFT" (the base's)
    commit_id: str
    diff_hunk: str
    position: int  # the line's place in the file's diff (GitHub's older addressing)
    created_at: float
    updated_at: float
    start_line: int | None = None
    in_reply_to_id: int | None = None
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Annotation:
    path: str
    start_line: int
    end_line: int
    annotation_level: str  # "notice" | "warning" | "failure"
    message: str
    title: str | None = None
    raw_details: str | None = None


@dataclass
class CheckSuite:
    id: int
    head_sha: str
    head_branch: str | None
    created_at: float
    updated_at: float
    by_actions: bool = False  # GitHub Actions' suite, else the App's
    status: str = "queued"
    conclusion: str | None = None


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    suite_id: int
    started_at: float
    status: str = "queued"  # "queued" | "in_progress" | "completed" | ...
    conclusion: str | None = None
    completed_at: float | None = None
    details_url: str | None = None
    external_id: str = ""
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations: list[Annotation] = field(default_factory=list)
    by_actions: bool = False  # a GitHub Actions job's check run, else the App's own


@dataclass
class CommitStatus:
    id: int
    sha: str
    state: str  # "error" | "failure" | "pending" | "success"
    context: str
    creator: User
    created_at: float
    updated_at: float
    description: str | None = None
    target_url: str | None = None


@dataclass
class Job(Upgradable):
    id: int
    run_id: int
    name: str
    head_sha: str
    head_branch: str | None
    check_run_id: int
    created_at: float
    status: str = "completed"
    conclusion: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    log: str = ""  # the plain text served behind the log download's redirect
    run_attempt: int = 1  # the execution of its workflow run it belongs to


@dataclass
class WorkflowRun(Upgradable):
    id: int
    name: str
    path: str  # the workflow file, e.g. ".github/workflows/ci.yml"
    workflow_id: int
    run_number: int
    head_sha: str
    head_branch: str | None
    suite_id: int
    actor: User
    created_at: float
    updated_at: float
    event: str = "pull_request"
    status: str = "completed"
    conclusion: str | None = None
    job_ids: list[int] = field(default_factory=list)  # of every attempt, oldest first
    run_attempt: int = 1  # its latest execution (a re-run is the next)


@dataclass
class Repo(Upgradable):
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
    reviews: dict[int, Review] = field(default_factory=dict)
    review_comments: dict[int, ReviewComment] = field(default_factory=dict)
    check_suites: dict[int, CheckSuite] = field(default_factory=dict)
    check_runs: dict[int, CheckRun] = field(default_factory=dict)
    statuses: list[CommitStatus] = field(default_factory=list)  # oldest first
    workflow_runs: dict[int, WorkflowRun] = field(default_factory=dict)
    jobs: dict[int, Job] = field(default_factory=dict)

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
    app_id: int | None = None  # None: the sandbox's first App (worlds saved before Apps 2, 3…)


@dataclass
class IssuedToken:
    installation_id: int
    expires_at: float
    # What the token request narrowed it to (None: every repository / permission).
    repos: frozenset[str] | None = None
    permissions: dict[str, str] | None = None


@dataclass
class World(Upgradable):
    """Everything the sandbox knows. Ids come from one counter, as unique as GitHub's.
    `app` is the sandbox's first App (the one `steelframe dev` runs as); the manifest flow
    registers more in `other_apps`, each with its own key, webhook and installations."""

    app: AppInfo
    clock: Callable[[], float] = time.time
    users: dict[str, User] = field(default_factory=dict)  # by lower-case login
    installations: dict[int, Installation] = field(default_factory=dict)
    repos: dict[str, Repo] = field(default_factory=dict)  # by lower-case full name
    tokens: dict[str, IssuedToken] = field(default_factory=dict)
    user_tokens: dict[str, str] = field(default_factory=dict)  # token -> lower login
    last_id: int = 100_000
    other_apps: dict[int, AppInfo] = field(default_factory=dict)

    def app_by_id(self, app_id: int) -> AppInfo | None:
        if app_id == self.app.id:
            return self.app
        return self.other_apps.get(app_id)

    def app_by_slug(self, slug: str) -> AppInfo | None:
        return next((a for a in self.all_apps() if a.slug.lower() == slug.lower()), None)

    def all_apps(self) -> list[AppInfo]:
        return [self.app, *self.other_apps.values()]

    def app_of(self, installation: Installation) -> AppInfo:
        """The App an installation belongs to (the first App for one saved without)."""
        if installation.app_id is None:
            return self.app
        return self.other_apps.get(installation.app_id, self.app)

    def installations_of(self, app: AppInfo) -> list[Installation]:
        return [i for i in self.installations.values() if self.app_of(i) is app]

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
