"""The record of a task's pull request that conflicts with its moved base: one row per
(task, base commit, head commit).

The row is the claim: the first delivery (a `push` to the base, a merged pull request
into it, or the reconciler's pass) that finds the pull request conflicting at these two
commits inserts it (a unique constraint); every later one finds it and changes nothing.
It keeps what was decided (an update run, or a person asked and why), the conflicted
files GitHub's test merge named (untrusted: file names from the repository), and, once
the run pushed, the merge commit it made: a conflict on that head continues the same chain
of update runs (`chain_sha`, `run_number`), which the bound counts.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base, JSONType


class UpdateVerdict(StrEnum):
    UPDATE = "update"  # an update run merges the base into the branch
    NEEDS_HUMAN = "needs_human"  # the bound is spent: a person is asked
    DECISION = "decision"  # one more update run a person's Decision asked for after a stop


class UpdateState(StrEnum):
    # The update run is enqueued, running, or waiting for a person (its agent asked a
    # question, it hit a budget): the Decision's run continues it, the same update run
    # (`base_run.UPDATE_GOES_ON`).
    QUEUED = "queued"
    PUSHED = "pushed"  # it pushed the merge commit `result_sha`
    STOPPED = "stopped"  # no run: a person is asked (verdict needs_human)
    # The run could not conclude the merge (conflict markers left, the agent changed
    # nothing) or the repository's tests failed on it: a person is asked.
    UNRESOLVED = "unresolved"
    SUPERSEDED = "superseded"  # the branch moved before the run: nothing to update there
    ENDED = "ended"  # the run ended otherwise (failed, was terminated, its PR merged or closed)


PENDING_STATES = frozenset({UpdateState.QUEUED})


class BaseUpdate(Base):
    __tablename__ = "base_updates"
    __table_args__ = (
        UniqueConstraint("task_id", "base_sha", "head_sha", name="uq_base_updates_tips"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    # The task's generation when the row was written: a task picked up again never runs
    # an old generation's update.
    generation: Mapped[int] = mapped_column(default=1)
    pr_number: Mapped[int]
    base_ref: Mapped[str] = mapped_column(String(255))
    base_sha: Mapped[str] = mapped_column(String(64))
    head_sha: Mapped[str] = mapped_column(String(64))
    # The first conflicting head of this chain; each update run's merge commit continues it.
    chain_sha: Mapped[str] = mapped_column(String(64))
    run_number: Mapped[int] = mapped_column(default=0)  # 0: no update run was started
    verdict: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")  # why this verdict or end, in words
    job_id: Mapped[str | None] = mapped_column(String(100))
    # The files the worker's merge left conflicted (names from the repository: untrusted).
    conflicts: Mapped[list[str]] = mapped_column(JSONType, default=list)
    # The merge commit the run pushed.
    result_sha: Mapped[str | None] = mapped_column(String(64), index=True)
    # The stop's comment on the pull request, once GitHub has it (None: not yet, or no stop).
    comment_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
