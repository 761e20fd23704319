"""Which database statements a module of bot/ (or a package: a folder) runs on a thread that
runs an event loop (a run's loop carries its termination watch and its GitHub calls: a slow
database there stalls them; `Database.run` moves the work to a worker thread)."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

# How many of a folder's innermost frames name a statement's caller: its helper (`tasks`),
# the helper's caller, and theirs (`scope.check_lease` <- `branch.push`).
FOLDER_FRAMES = 3


def _frame_in(stack: list[traceback.FrameSummary], module: str) -> str | None:
    """The innermost frame of `stack` in `module` (a path from the repository's root), as
    "<module>:<line>": the statement is that module's doing, directly or through a helper
    (`bot.lifecycle.tasks`) it called synchronously. A `module` ending in "/" is a folder:
    any module under it, its innermost frames named from the inside out."""
    if module.endswith("/"):
        inside = [_named(frame, module) for frame in reversed(stack)]
        found = [name for name in inside if name is not None][:FOLDER_FRAMES]
        return " <- ".join(found) or None
    for frame in reversed(stack):
        if frame.filename.replace("\\", "/").endswith(f"/{module}"):
            return f"{module}:{frame.lineno}"
    return None


def _named(frame: traceback.FrameSummary, folder: str) -> str | None:
    path = frame.filename.replace("\\", "/")
    if f"/{folder}" not in path:
        return None
    return f"{path[path.rindex(f'/{folder}') + 1 :]}:{frame.lineno}"


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextmanager
def statements_on_the_loop(engine: Engine, module: str) -> Iterator[list[str]]:
    """While open, collects "<caller>: <statement>" for each statement `engine` executes on
    a thread with a running event loop while `module` ("bot/lifecycle/budget.py", or a
    folder: "bot/lifecycle/") is on that thread's stack. A coroutine's frames are on its
    loop's stack while it runs, so a synchronous call from any coroutine of the module
    counts, however deep. Work handed to `Database.run` runs on a worker thread, whose
    stack starts there: it is not counted."""
    seen: list[str] = []

    def _seen(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        caller = _frame_in(traceback.extract_stack(), module)
        if caller is not None and _on_a_loop():
            seen.append(f"{caller}: {' '.join(statement.split())[:80]}")

    event.listen(engine, "before_cursor_execute", _seen)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", _seen)
