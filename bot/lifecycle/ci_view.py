"""A task's failing-CI history as its JSON shows it (docs/api.md, "CI fix runs"): one entry per
head commit CI failed on, from `ci_fixes` (bot.lifecycle.ci_store writes it), with which fix
run of the bound it started and how that ended. Reads only; the GUI's run modal and the TUI's
task detail show it. The failure's evidence (annotations, log tail) stays out: it is long,
untrusted and private to the run."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.contracts.tasks import FailingCheck
from bot.lifecycle.ci_models import CiFix, check_names, failing_checks
from bot.lifecycle.models import EventKind, TaskEvent

# The events whose `data` names a head commit and the bound then in force (ci_store.claim_tx).
_CLAIM_EVENTS = (EventKind.CI_FIX_RUN.value, EventKind.TRANSITION.value)


@dataclass(frozen=True)
class CiFixView:
    """What happened when CI failed on one head commit of the task's pull request."""

    head_sha: str
    pr_number: int
    checks: tuple[str, ...]  # the names of `failing`
    failing: tuple[FailingCheck, ...]
    run: int  # which fix run of the chain this commit started (0: none, a person was asked)
    of: int | None  # the bound per head commit when it was decided (None: not recorded)
    verdict: str  # ci_models.CiVerdict
    outcome: str  # ci_models.CiFixState: queued, pushed, unchanged, superseded, ended, stopped
    result_sha: str | None  # the commit the fix run pushed
    reason: str
    at: str
    updated_at: str


def fix_history(session: Session, task_id: int) -> list[CiFixView]:
    """Every head commit CI failed on, oldest first."""
    rows = list(session.scalars(select(CiFix).where(CiFix.task_id == task_id).order_by(CiFix.id)))
    if not rows:
        return []
    recorded = bounds(session, task_id)
    return [_view(row, recorded.get(row.head_sha)) for row in rows]


def _view(row: CiFix, bound: int | None) -> CiFixView:
    failing = failing_checks(row.failing)
    return CiFixView(
        head_sha=row.head_sha,
        pr_number=row.pr_number,
        checks=tuple(check_names(failing)),
        failing=tuple(failing),
        run=row.run_number,
        of=bound,
        verdict=row.verdict,
        outcome=row.state,
        result_sha=row.result_sha,
        reason=row.reason,
        at=row.created_at.isoformat(),
        updated_at=row.updated_at.isoformat(),
    )


def bounds(session: Session, task_id: int) -> dict[str, int]:
    """head sha -> the bound recorded with its claim (the setting may have changed since)."""
    found: dict[str, int] = {}
    for event in session.scalars(
        select(TaskEvent).where(TaskEvent.task_id == task_id, TaskEvent.kind.in_(_CLAIM_EVENTS))
    ):
        data = event.data or {}
        sha, bound = data.get("head_sha"), data.get("fix_runs")
        if isinstance(sha, str) and isinstance(bound, int):
            found[sha] = bound
    return found
