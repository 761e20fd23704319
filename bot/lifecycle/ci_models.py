"""The record of failing CI on a task's pull request: one row per (task, head commit).

The row is the claim: the first delivery about a failure on a head commit inserts it (a
unique constraint), every later one (another check of the same commit, a redelivery under
any id) finds it and changes nothing. It keeps what was decided (a fix run, or a person's
help and why), the evidence a fix run works from (pinned when the failure was read,
redacted, untrusted) and, once the run pushed, the commit it made: a failure on that commit
continues the same chain of fix runs (`chain_sha`, `run_number`), which the bound counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import msgspec
from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.contracts.tasks import EventData, FailingCheck
from bot.db import Base, JSONType

_FAILING = list[FailingCheck]


def failing_checks(stored: object) -> list[FailingCheck]:
    """The failing checks as stored (a `ci_fixes` row's `failing`, an event's), decoded and
    checked against their declaration (msgspec.ValidationError: not the shape written)."""
    return msgspec.convert(stored or [], _FAILING)


def check_names(failing: Sequence[FailingCheck]) -> list[str]:
    return [check["name"] for check in failing]


def names_line(row: CiFix) -> str:
    """The row's failing checks' names in one line, for text made from them (a prompt, a
    note) that publishes it only through `Redactor.published`."""
    return ", ".join(check_names(failing_checks(row.failing)))


def fix_event_data(
    head_sha: str, pr_number: int, failing: Sequence[FailingCheck], *, run: int, fix_runs: int
) -> EventData:
    """A `ci_fix_run` event's data (`ci_store`, `ci_decision`), also its claim's transition's:
    the checks as data, each name whole whatever it holds (a comma, markup)."""
    return {
        "head_sha": head_sha,
        "pr_number": pr_number,
        "checks": check_names(failing),
        "failing": list(failing),
        "fix_run": run,
        "fix_runs": fix_runs,
    }


@dataclass(frozen=True)
class FixRunFacts:
    """What a `ci_fix_run` event says (its data, as `fix_event_data` writes it): read here
    once for the Board row and the events stream's frame."""

    pr_number: int
    head_sha: str
    checks: list[str]
    failing: tuple[FailingCheck, ...]
    run: int  # this fix run's number for the failing head
    of: int  # the fix runs that head allows

    @classmethod
    def of_event(cls, data: EventData | None) -> FixRunFacts:
        data = data or {}
        if "failing" in data:
            failing = failing_checks(data["failing"])
        else:  # an event written before the conclusions were: its names only
            failing = [{"name": name, "conclusion": ""} for name in data.get("checks", ())]
        return cls(
            pr_number=data.get("pr_number") or 0,
            head_sha=data.get("head_sha", ""),
            checks=check_names(failing),
            failing=tuple(failing),
            run=data.get("fix_run", 0),
            of=data.get("fix_runs", 0),
        )


class CiVerdict(StrEnum):
    FIX = "fix"  # a fix run on the branch
    NEEDS_HUMAN = "needs_human"  # the bound is spent, or the failure is not the change's
    DECISION = "decision"  # one more fix run a person's Decision asked for after a stop


class CiFixState(StrEnum):
    # The fix run is enqueued, running, or waiting for a person (it asked a question, hit a
    # budget): the Decision's run continues it, the same fix run (`ci_run.FIX_GOES_ON`).
    QUEUED = "queued"
    PUSHED = "pushed"  # the fix run pushed `result_sha`
    UNCHANGED = "unchanged"  # the fix run changed nothing: stopped, a person is asked
    SUPERSEDED = "superseded"  # the branch moved before the run: nothing to fix there
    # The run ended otherwise (failed, terminated): counted against the bound, and the next
    # failure on the commit claims it again (RECLAIMABLE_STATES).
    ENDED = "ended"
    STOPPED = "stopped"  # no fix run: a person is asked (`verdict` needs_human)
    # Its pull request was merged or closed under the fix run, which no run concludes now;
    # reopened, the next failure on the commit claims it again (`ci_store.claim_tx`).
    INTERRUPTED = "interrupted"


PENDING_STATES = frozenset({CiFixState.QUEUED})
# A row that claims its head commit no longer: the next failure on the commit takes it over
# (`ci_store.claim_tx`, compare-and-set on the state read). An interrupted fix run never
# concluded; an ended one (it failed, was terminated) fixed nothing, so a failure on the
# same commit once the task is delivered again (a re-run of its checks, another check)
# would otherwise be swallowed as handled with nobody told. The ended run counts against
# the bound.
RECLAIMABLE_STATES = frozenset({CiFixState.INTERRUPTED, CiFixState.ENDED})


class CiFix(Base):
    __tablename__ = "ci_fixes"
    __table_args__ = (UniqueConstraint("task_id", "head_sha", name="uq_ci_fixes_head"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    # The task's generation when the row was written: a task picked up again never runs
    # an old generation's fix.
    generation: Mapped[int] = mapped_column(default=1)
    pr_number: Mapped[int]
    head_sha: Mapped[str] = mapped_column(String(64))
    # The first failing commit of this chain; each fix run's commit continues it.
    chain_sha: Mapped[str] = mapped_column(String(64))
    # Which fix run of the chain this row started (0: none was started).
    run_number: Mapped[int] = mapped_column(default=0)
    verdict: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20))
    # The failing checks (`failing_checks` reads them), names as CI gave them: data,
    # published only through `Redactor.published` (the summary, the progress comment).
    failing: Mapped[list[FailingCheck]] = mapped_column(JSONType, default=list)
    reason: Mapped[str] = mapped_column(Text, default="")  # why this verdict, in words
    evidence: Mapped[str] = mapped_column(Text, default="")  # redacted; untrusted
    job_id: Mapped[str | None] = mapped_column(String(100))
    # The commit the fix run pushed (or, while it waits for a person, its work so far).
    result_sha: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
