"""The task JSON: what the board, GET /api/operator/tasks/{id} and a task's log return
(docs/api.md, "Task lifecycle"), and the focused issue's task Chat reads.

Declared once here; `operator_api/schemas.py` generates the OpenAPI components from these
Structs, so the schema and the wire cannot drift apart. Every field is always sent (a null
stays a null); unknown fields are refused when decoding (`additionalProperties: false`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class _Wire(msgspec.Struct, forbid_unknown_fields=True):
    """Base of the task JSON's objects: exact keys, every one sent."""


class LastEvent(_Wire):
    kind: str
    at: str
    detail: str | None


class BoardTask(_Wire):
    """A task as the board lists it."""

    id: int
    repo: str
    issue: int
    title: str
    state: str
    archived: bool
    pr_url: str | None
    cost_usd: float
    last_event: LastEvent | None
    updated_at: str


class CodingSandbox(_Wire):
    """How this service isolates coding runs (also in /healthz)."""

    mode: Literal["bwrap", "off"]
    network: Literal["allowlist", "off"]
    warning: str | None


class Board(_Wire):
    tasks: list[BoardTask]
    coding_sandbox: CodingSandbox


class TaskUsage(_Wire):
    tokens: int
    cost_usd: float
    runtime_seconds: float


class BlockedHost(_Wire):
    """A host the run's egress proxy refused, once per host per run."""

    attempt: int
    host: str
    port: int
    count: int
    reason: str
    first_at: str


class Lease(_Wire):
    holder: str
    heartbeat_at: str
    expires_at: str


class TaskEvent(_Wire):
    id: int
    kind: str
    # "from" is a Python keyword: the field is `from_`, its key on the wire "from".
    from_: str | None = msgspec.field(name="from")
    to: str | None
    actor: str
    at: str
    detail: str | None
    # The event's own JSON object (a transition's data: what the run said, the PR, ...).
    data: dict[str, Any] | None


class ReviewThread(_Wire):
    """A review thread of the task's pull request, as the ledger keeps it."""

    kind: Literal["comment", "review"]
    root_id: int
    pr_number: int
    path: str | None
    line: int | None
    author: str
    state: Literal["open", "addressed", "declined", "needs_operator"]
    commit: str | None
    reason: str | None
    url: str | None
    created_at: str
    updated_at: str


class TaskDetail(BoardTask):
    """One task with its whole event log, its limits so far and its lease if a run holds it."""

    origin_session: str | None
    generation: int
    attempts: int
    branch: str | None
    pr_number: int | None
    question: str | None
    last_error: str | None
    summary: str | None
    runtime_session: str | None
    usage: TaskUsage
    created_at: str
    blocked: list[BlockedHost]
    lease: Lease | None
    events: list[TaskEvent]
    review_threads: list[ReviewThread]
    ready_for_review: bool


class FocusedTask(BoardTask):
    """The focused issue's task as Chat's context sees it."""

    question: str | None
    attempts: int


class RunLog(_Wire):
    generation: int
    attempt: int
    status: str
    at: str
    text: str


class TaskLog(_Wire):
    """The private, redacted runtime logs of a task's runs (newest last)."""

    task: int
    runs: list[RunLog]
