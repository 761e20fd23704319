"""What Chat reads of the task lifecycle, handed in by the composition root
(steelframe/parts.py passes bot.lifecycle.board's views): Chat never imports the lifecycle,
it reads the task JSON Structs of bot.contracts.tasks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.contracts.tasks import FocusedTask, PullLeft

# (repo, issue) -> the task as the focused issue's context shows it, or None.
FocusedLookup = Callable[[str, int], Awaitable[FocusedTask | None]]
# (repo, issue) -> the task's pull request and review thread ledger, or None.
LeftLookup = Callable[[str, int], Awaitable[PullLeft | None]]


@dataclass(frozen=True)
class TaskReader:
    """The operator's typed commands' reads: "what is #N waiting for?", "discuss #N"
    (`focused`) and "what is left on #N?" (`left`)."""

    focused: FocusedLookup
    left: LeftLookup
