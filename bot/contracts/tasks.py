"""The task JSON: what the board, GET /api/operator/tasks/{id} and a task's log return
(docs/api.md, "Task lifecycle"), and the focused issue's task Chat reads.

Declared once here; `operator_api/schemas.py` generates the OpenAPI components from these
Structs, so the schema and the wire cannot drift apart. Every field is always sent (a null
stays a null); unknown fields are refused when decoding (`additionalProperties: false`).
"""

from __future__ import annotations

from typing import Literal, TypedDict

import msgspec


class _Wire(msgspec.Struct, forbid_unknown_fields=True):
    """Base of the task JSON's objects: exact keys, every one sent."""


class LastEvent(_Wire):
    kind: str
    at: str
    detail: str | None


class TaskCore(_Wire):
    """A task's row as every view shows it."""

    id: int
    repo: str
    issue: int
    title: str
    state: str
    archived: bool
    pr_url: str | None
    cost_usd: float
    # Tokens the coding runtime reported; with a cost of 0 the agent reported no cost.
    tokens: int
    last_event: LastEvent | None
    updated_at: str


class ReviewCounts(_Wire):
    """The review ledger's counts, and the words every surface shows for them."""

    open: int
    addressed: int
    declined: int
    needs_operator: int
    summary: str


class BoardCard(TaskCore):
    """A task's card: with its pull request loop (bot/lifecycle/pull_view.py)."""

    pr_state: Literal["draft", "open", "merged", "closed"] | None
    review: ReviewCounts
    ready_for_review: bool
    # What the task asks: on the Board only while it waits for a Decision (null otherwise,
    # so the list stays small), for the Dashboard's "Questions waiting"; the task detail
    # sends the last question asked whatever its state.
    question: str | None


class ReviewPickup(_Wire):
    """A review run took review threads up (a `review_pickup` event): what the events
    stream's `review` event told."""

    event_id: int  # the task event's: a client that polls tells each one once
    at: str
    threads: list[str]  # "comment:<id>" / "review:<id>"


class FailingCheck(TypedDict):
    """A check run or commit status failing on a head commit (bot/lifecycle/ci_intake.py).
    `name` is CI's text (a workflow's author names its jobs), untrusted: a client shows it
    as text, never as markup. `conclusion`: `failure` or `timed_out` (a check run), `failure`
    or `error` (a status); "" where it was not recorded (rows and events from before it
    was, their names read from the old comma-joined text)."""

    name: str
    conclusion: str


class FixRun(_Wire):
    """Failing CI started fix run `run` of `of` on `head_sha` (a `ci_fix_run` event): what
    the events stream's `fix_run` event told. `checks`: the failing checks' names, as
    `failing` has them with their conclusions."""

    event_id: int
    at: str
    pr_number: int
    head_sha: str
    checks: list[str]
    run: int
    of: int
    # Defaulted: read from an older service, which did not send it, as none.
    failing: tuple[FailingCheck, ...] = ()


class BoardTask(BoardCard, kw_only=True):
    """A task as the board lists it: its card, and its latest review pickup and fix run
    (null without one), so that a client polling the Board words their notifications
    without reading the task (docs/api.md, "Task lifecycle"). Keyword-only with a default
    (sent always, after the fields of the Structs that extend this one): a client reading
    an older service, which did not send them, reads null."""

    review_pickup: ReviewPickup | None = None
    fix_run: FixRun | None = None


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


class BudgetData(TypedDict):
    """The budget a run was held to (bot/lifecycle/budget.py), as a budget stop records it."""

    tokens: int | None
    usd: float | None
    source: str  # "settings" or "repository config"


class EventData(TypedDict, total=False):
    """A task event's own JSON object: every key an event may carry, with its type. One
    declaration for whoever writes it (`Move.data`, `tasks.record`), stores it (the
    `task_events.data` column) and sends it (the task JSON). Keys are present only when the
    event has them (a `created` event has none); a key set to null stays null. The comment
    above each group names the events that set it."""

    # `transition` to delivered (bot/lifecycle/finish.py; the reconciler finding the pull
    # request); a pull request's end (merged / closed, bot/lifecycle/pull_end.py); pr_url and
    # pr_number: to terminated while the task's pull request was open (terminate.py).
    pr_url: str | None
    pr_number: int | None
    summary: str
    draft: bool  # opened as a draft pull request (bot/lifecycle/pull_view.py reads it)
    merge: str | None  # the merge commit
    merged: bool  # `pull_end_ignored`: the ignored end was a merge
    # `transition` to waiting_for_info: what the run (or a budget stop) asks.
    question: str
    limit: str | None  # the limit that stopped it ("tokens", "cost", ...); `limit_exceeded`
    budget: BudgetData
    # `transition` to failed, or back to queued for a retry.
    error: str
    retry_in: float  # seconds until the next attempt
    # `transition` resumed by a Decision; `decision`, `decision_ignored`.
    comment_id: int
    author: str
    # Failing CI on the pull request (bot/lifecycle/ci_store.py, ci_run.py); `ci_fix_run`.
    head_sha: str
    checks: list[str]  # their names (an event from before `failing` has only these)
    failing: list[FailingCheck]
    fix_run: int  # which fix run of the chain
    fix_runs: int  # the bound per head commit
    # A fix run one more Decision asked for (bot/lifecycle/ci_decision.py); also a `note`
    # of an update run one asked for (bot/lifecycle/base_decision.py), with pr_number and
    # head_sha.
    decision: bool
    # `runtime_session`: the coding runtime's session and its transcript (redacted).
    session_id: str | None
    transcript: str | None
    # `pickup_ignored` ("issues.<action>"); `reconciled`: what the reconciler did.
    action: str
    job_id: str | None
    lost_job: str | None
    labels: list[str]  # labels repaired
    # `review_pickup`: the threads a review run took up ("comment:<id>" / "review:<id>").
    threads: list[str]
    job: str
    # `note`: the run's environment (setup, bot/lifecycle/setup_run.py; the repository's
    # tests, bot/lifecycle/repo_tests.py), all text but the tests' memory limit.
    setup: str
    key: str
    command: str
    exit_code: str
    seconds: str
    tail: str
    # The tests' note: the run's memory limit (MB) when reaching it stopped the tests (the
    # kernel's kill, read as a plain failed exit otherwise); null when it did not.
    memory_limit_mb: int | None


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
    data: EventData | None


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
    picked_at: str | None  # when a review run took the thread up (None: waiting for one)
    excerpt: str  # untrusted: the start of the reviewer's words, shown as text
    created_at: str
    updated_at: str


class TaskDetail(BoardTask):
    """One task with its whole event log, its limits so far and its lease if a run holds it."""

    origin_session: str | None
    generation: int
    attempts: int
    branch: str | None
    pr_number: int | None
    last_error: str | None
    summary: str | None
    runtime_session: str | None
    usage: TaskUsage
    created_at: str
    blocked: list[BlockedHost]
    lease: Lease | None
    events: list[TaskEvent]
    review_threads: list[ReviewThread]
    # Issue 34: its plan, the budget hold a queued task is under, what it will likely spend,
    # and past Decisions offered for its question (bot/lifecycle/leverage_view.py).
    plan: TaskPlan | None
    held: str | None
    estimate: TaskEstimate | None
    offered: list[OfferedDecision]
    draft: str | None
    # Failing CI on its pull request, per head commit (bot/lifecycle/ci_view.py).
    ci: list[CiFix]


class CiFix(_Wire):
    """What happened when CI failed on one head commit of the task's pull request."""

    head_sha: str
    pr_number: int
    checks: list[str]  # the failing checks' names, as `failing` has them
    run: int  # which fix run of the chain this commit started (0: none, a person was asked)
    of: int | None  # the bound per head commit when it was decided (None: not recorded)
    verdict: str
    outcome: str  # queued, pushed, unchanged, superseded, ended, stopped, interrupted
    result_sha: str | None  # the commit the fix run pushed
    reason: str
    at: str
    updated_at: str
    # Defaulted: read from an older service, which did not send it, as none.
    failing: tuple[FailingCheck, ...] = ()


class TaskPlan(_Wire):
    # "withdrawn": still proposed when its task ended without a Decision (terminated, its
    # issue closed); no Decision can settle it now (bot/lifecycle/plan_store.py).
    status: Literal["proposed", "approved", "rejected", "withdrawn"]
    text: str
    brief: str | None
    edited: bool
    proposed_at: str
    decided_at: str | None


class TaskEstimate(_Wire):
    runs: int
    tokens: int
    tokens_p90: int
    usd: float | None
    usd_p90: float | None
    text: str
    # How many runs the likeness weights amount to, and the estimate's typical relative
    # error on the repository's own past (0.25: within ±25%); None with too few runs.
    similar: int | None = None
    typical_error: float | None = None


class OfferedDecision(_Wire):
    issue: int
    task_id: int
    at: str
    question: str
    decision: str
    score: float


class FocusedTask(TaskCore):
    """The focused issue's task as Chat's context sees it."""

    question: str | None
    attempts: int


class PullLeft(_Wire):
    """What is left on a task's pull request, as Chat's "what is left on #N?" reads it:
    the task's card (its pull request state and ledger counts) and its review threads."""

    task: BoardTask
    threads: list[ReviewThread]


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
