"""The task state machine: states, the transitions allowed between them, and the labels.

docs/lifecycle.md draws the same machine; `TRANSITIONS` is the one source both follow.
"""

from __future__ import annotations

from enum import StrEnum

from bot.errors import Conflict


class TaskState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_INFO = "waiting_for_info"
    DELIVERED = "delivered"
    FAILED = "failed"
    TERMINATED = "terminated"


# A run may be in flight (or about to be) only in these states; a second pickup does nothing.
LIVE = frozenset({TaskState.QUEUED, TaskState.RUNNING, TaskState.WAITING_FOR_INFO})
FINISHED = frozenset({TaskState.DELIVERED, TaskState.FAILED, TaskState.TERMINATED})
# Results that reach the chat session a task was filed from (spec: background results).
CHAT_RESULTS = frozenset({TaskState.DELIVERED, TaskState.WAITING_FOR_INFO, TaskState.FAILED})

TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    TaskState.QUEUED: frozenset(
        {TaskState.RUNNING, TaskState.FAILED, TaskState.TERMINATED, TaskState.DELIVERED}
    ),
    TaskState.RUNNING: frozenset(
        {
            TaskState.QUEUED,  # a retry after a failed attempt or a lost worker
            TaskState.WAITING_FOR_INFO,
            TaskState.DELIVERED,
            TaskState.FAILED,
            TaskState.TERMINATED,
        }
    ),
    TaskState.WAITING_FOR_INFO: frozenset({TaskState.RUNNING, TaskState.TERMINATED}),
    # A failed task whose pull request turns out to exist was delivered after all.
    TaskState.FAILED: frozenset({TaskState.QUEUED, TaskState.DELIVERED}),
    TaskState.TERMINATED: frozenset({TaskState.QUEUED}),
    TaskState.DELIVERED: frozenset(),
}


class StateLabel(StrEnum):
    """The label an issue carries for each task state; exactly one of them at a time."""

    QUEUED = "steelframe:queued"
    IN_PROGRESS = "steelframe:in-progress"
    NEEDS_HUMAN = "steelframe:needs_human"
    DELIVERED = "steelframe:delivered"
    FAILED = "steelframe:failed"
    TERMINATED = "steelframe:terminated"


LABEL_FOR_STATE: dict[TaskState, StateLabel] = {
    TaskState.QUEUED: StateLabel.QUEUED,
    TaskState.RUNNING: StateLabel.IN_PROGRESS,
    TaskState.WAITING_FOR_INFO: StateLabel.NEEDS_HUMAN,
    TaskState.DELIVERED: StateLabel.DELIVERED,
    TaskState.FAILED: StateLabel.FAILED,
    TaskState.TERMINATED: StateLabel.TERMINATED,
}


class IllegalTransition(Conflict):
    """A transition the state machine does not allow; the task is left as it was."""

    code = "illegal_transition"

    def __init__(self, task_id: int, current: str, wanted: str) -> None:
        allowed = sorted(TRANSITIONS.get(TaskState(current), frozenset()))
        super().__init__(
            f"task {task_id} is {current}; it cannot become {wanted}",
            detail={"task": task_id, "state": current, "wanted": wanted, "allowed": allowed},
        )
        self.current = current
        self.wanted = wanted


def can_transition(current: TaskState, wanted: TaskState) -> bool:
    return wanted in TRANSITIONS[current]


def check_transition(task_id: int, current: str, wanted: TaskState) -> None:
    if not can_transition(TaskState(current), wanted):
        raise IllegalTransition(task_id, current, wanted)
