"""The operator events stream's frames (docs/api.md, "Events"), declared once.

Each frame is a msgspec Struct tagged by `type`; `EventFrame` is their union. The events
log stores a frame as its JSON and decodes it back into the Struct, the SSE endpoint
encodes the Struct, and `operator_api/schemas.py` generates the `Event` schema from them.
`id` is the log's id for the operator (monotonic, the SSE `Last-Event-ID`): 0 until the
log assigns it on append, set when the frame is read back.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from bot.contracts.tasks import FailingCheck


class SessionChange(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    DELETED = "deleted"
    SUMMARISED = "summarised"
    # Words were taken out of it (a `forget`, anyone's): a client showing it reads it again.
    FORGOTTEN = "forgotten"


class ResultKind(StrEnum):
    DELIVERED = "delivered"
    QUESTION = "question"
    FAILED = "failed"


class _Frame(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, kw_only=True):
    id: int = 0


class LedgerCounts(msgspec.Struct, forbid_unknown_fields=True):
    open: int
    addressed: int
    declined: int
    needs_operator: int
    summary: str


class TaskFrame(_Frame, tag="task"):
    """A committed transition of a task (to every operator: the board is shared), with what
    its Board card and the Dashboard show, as the Board's list has it: the pull request loop
    (as a `ledger` event) and, while it waits, its question. A client updates the card from
    the frame alone, with no read of the task per change."""

    task_id: int
    repo: str
    issue: int
    title: str
    state: str
    pr_url: str | None
    cost_usd: float
    tokens: int
    reason: str
    updated_at: str
    pr_state: str | None
    review: LedgerCounts
    ready_for_review: bool
    question: str | None  # what it asks while waiting_for_info, else null
    # The chat session this change's result is posted to next (a `result` event follows,
    # bot/lifecycle/delivery.py), else null: a client showing that session skips telling the
    # change, which the result says. Defaulted: frames logged before it decode as before.
    result_session: str | None = None


class ResultFrame(_Frame, tag="result"):
    """A task result appended to a chat session (to the session's operator)."""

    session_id: str
    task_id: int
    kind: ResultKind
    text: str
    message_id: str


class SessionFrame(_Frame, tag="session"):
    """A chat session created, updated, deleted, summarised or forgotten in (to its
    operator)."""

    session_id: str
    change: SessionChange


class ReviewFrame(_Frame, tag="review"):
    """A review run took review threads of a task's pull request up (to every operator)."""

    task_id: int
    repo: str
    issue: int
    pr_number: int | None
    pr_url: str | None
    threads: list[str]  # "comment:<id>" / "review:<id>"
    at: str


class FixRunFrame(_Frame, tag="fix_run"):
    """Failing CI on a task's pull request started fix run `run` of `of` (to every operator)."""

    task_id: int
    pr_number: int
    head_sha: str
    checks: list[str]  # the failing checks' names, as `failing` has them
    run: int
    of: int
    # Defaulted: frames logged before it decode as before (their names only).
    failing: tuple[FailingCheck, ...] = ()


class LedgerFrame(_Frame, tag="ledger"):
    """A task's review thread ledger changed: its card's pull request loop, as on the Board."""

    task_id: int
    repo: str
    issue: int
    title: str
    state: str
    pr_url: str | None
    pr_state: str | None
    review: LedgerCounts
    ready_for_review: bool


class ResyncFrame(_Frame, tag="resync"):
    """Events were missed (a gap in the log, or a dropped append): reload, then go on."""

    reason: str


EventFrame = (
    TaskFrame | ResultFrame | SessionFrame | ReviewFrame | FixRunFrame | LedgerFrame | ResyncFrame
)
EVENT_FRAMES: tuple[type[_Frame], ...] = (
    TaskFrame,
    ResultFrame,
    SessionFrame,
    ReviewFrame,
    FixRunFrame,
    LedgerFrame,
    ResyncFrame,
)
MISSED_REASON = "events were missed"
