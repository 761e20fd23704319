"""The task state machine: states, the transitions allowed between them, and the labels.

docs/lifecycle.md draws the same machine; `TRANSITIONS` is the one source both follow.
"""

from __future__ import annotations

from enum import StrEnum

from bot.contracts.errors import ErrorDetail
from bot.errors import Conflict


class TaskState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_INFO = "waiting_for_info"
    DELIVERED = "delivered"
    FAILED = "failed"
    TERMINATED = "terminated"
    # Final: the task's pull request was merged, or closed without a merge (docs/lifecycle.md).
    MERGED = "merged"
    CLOSED = "closed"


# A run may be in flight (or about to be) only in these states; a second pickup does nothing.
LIVE = frozenset({TaskState.QUEUED, TaskState.RUNNING, TaskState.WAITING_FOR_INFO})
# Its pull request is merged or closed: nothing moves a task out of these, but the reopen
# of a pull request closed without a merge (back as it was: bot.lifecycle.pull_end).
FINAL = frozenset({TaskState.MERGED, TaskState.CLOSED})
FINISHED = frozenset({TaskState.DELIVERED, TaskState.FAILED, TaskState.TERMINATED, *FINAL})
# A pull request's end reaches a task in these states: a person may merge or close it while
# its task waits for them after failing CI, is queued for a review run, or runs a review or
# CI fix run (that run then stops: its task is final, bot.lifecycle.run._watching).
PULL_ENDABLE = frozenset(
    {
        TaskState.DELIVERED,
        TaskState.FAILED,
        TaskState.WAITING_FOR_INFO,
        TaskState.QUEUED,
        TaskState.RUNNING,
    }
)
# Results that reach the chat session a task was filed from (spec: background results).
CHAT_RESULTS = frozenset({TaskState.DELIVERED, TaskState.WAITING_FOR_INFO, TaskState.FAILED})

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.QUEUED: frozenset(
        {
            TaskState.RUNNING,
            TaskState.FAILED,
            TaskState.TERMINATED,
            TaskState.DELIVERED,
            TaskState.MERGED,  # its pull request merged while a review run was queued
            TaskState.CLOSED,
        }
    ),
    TaskState.RUNNING: frozenset(
        {
            TaskState.QUEUED,  # a retry after a failed attempt or a lost worker
            TaskState.WAITING_FOR_INFO,
            TaskState.DELIVERED,
            TaskState.FAILED,
            TaskState.TERMINATED,
            TaskState.MERGED,  # its pull request merged or closed during a review or fix run
            TaskState.CLOSED,
        }
    ),
    TaskState.WAITING_FOR_INFO: frozenset(
        {
            TaskState.RUNNING,
            TaskState.TERMINATED,
            TaskState.MERGED,
            TaskState.CLOSED,
            # A review question made moot (every review it was about dismissed) puts the
            # task back as it was before the review (bot.lifecycle.reviews).
            TaskState.DELIVERED,
            TaskState.FAILED,
        }
    ),
    # A failed task whose pull request turns out to exist was delivered after all.
    TaskState.FAILED: frozenset(
        {TaskState.QUEUED, TaskState.DELIVERED, TaskState.MERGED, TaskState.CLOSED}
    ),
    # Its pull request, left open by the terminate, merged after all: the work landed
    # (bot.lifecycle.pull_end; closed without a merge, it stays terminated).
    TaskState.TERMINATED: frozenset({TaskState.QUEUED, TaskState.MERGED}),
    # A review of the task's pull request queues a review run (bot.lifecycle.review_pickup);
    # failing CI on it gets a fix run or a person's help (bot.lifecycle.ci_intake).
    TaskState.DELIVERED: frozenset(
        {
            TaskState.QUEUED,
            TaskState.MERGED,
            TaskState.CLOSED,
            TaskState.RUNNING,
            TaskState.WAITING_FOR_INFO,
        }
    ),
    TaskState.MERGED: frozenset(),
    # Its pull request reopened: back to the state its close found (a run it stopped: its
    # pull request is open again, so `delivered`).
    TaskState.CLOSED: frozenset(
        {TaskState.DELIVERED, TaskState.FAILED, TaskState.WAITING_FOR_INFO}
    ),
}


class StateLabel(StrEnum):
    """The label an issue carries for each task state; exactly one of them at a time."""

    QUEUED = "steelframe:queued"
    IN_PROGRESS = "steelframe:in-progress"
    NEEDS_HUMAN = "steelframe:needs_human"
    DELIVERED = "steelframe:delivered"
    FAILED = "steelframe:failed"
    TERMINATED = "steelframe:terminated"
    MERGED = "steelframe:merged"
    CLOSED = "steelframe:closed"


LABEL_FOR_STATE: dict[TaskState, StateLabel] = {
    TaskState.QUEUED: StateLabel.QUEUED,
    TaskState.RUNNING: StateLabel.IN_PROGRESS,
    TaskState.WAITING_FOR_INFO: StateLabel.NEEDS_HUMAN,
    TaskState.DELIVERED: StateLabel.DELIVERED,
    TaskState.FAILED: StateLabel.FAILED,
    TaskState.TERMINATED: StateLabel.TERMINATED,
    TaskState.MERGED: StateLabel.MERGED,
    TaskState.CLOSED: StateLabel.CLOSED,
}


class IllegalTransition(Conflict):
    """A transition the state machine does not allow; the task is left as it was."""

    code = "illegal_transition"

    def __init__(self, task_id: int, current: str, wanted: str) -> None:
        allowed = sorted(state.value for state in TRANSITIONS.get(TaskState(current), ()))
        super().__init__(
            f"task {task_id} is {current}; it cannot become {wanted}",
            detail=ErrorDetail(task=task_id, state=current, wanted=wanted, allowed=allowed),
        )
        self.current = current
        self.wanted = wanted


def can_transition(current: TaskState, wanted: TaskState) -> bool:
    return wanted in TRANSITIONS[current]


def check_transition(task_id: int, current: str, wanted: TaskState) -> None:
    if not can_transition(TaskState(current), wanted):
        raise IllegalTransition(task_id, current, wanted)
