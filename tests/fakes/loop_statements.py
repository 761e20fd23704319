"""Which database statements a module of bot/ (or a package: a folder) runs on a thread that
runs an event loop (a run's loop carries its termination watch and its GitHub calls, the
service's its webhooks and streams: a slow database there stalls them; `Database.run` moves
the work to a worker thread)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from sqlalchemy import Engine, event

# How many of a folder's innermost frames name a statement's caller: its helper (`tasks`),
# the helper's caller, and theirs (`scope.check_lease` <- `branch.push`).
FOLDER_FRAMES = 3
_ASYNC = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _caller(frame: FrameType | None, module: str) -> str | None:
    """Who ran a statement whose innermost frame is `frame`: "<module>:<line>", the
    innermost frame in `module` (a path from the repository's root): the statement is that
    module's doing, directly or through a helper it called synchronously. A `module` ending
    in "/" is a folder: its innermost frames named from the inside out, and its innermost
    coroutine (which ran the statement synchronously), when the statement is its own doing:
    a coroutine of the folder is on the stack, or no test's frame is (a test that calls the
    folder's functions itself, on its loop, is not the product's doing)."""
    folder = module.endswith("/")
    found: list[str] = []
    coroutine: str | None = None  # the folder's innermost: where an `await` is missing
    tests = False
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        at = path.rfind(f"/{module}")
        if at >= 0 and not folder:
            return f"{module}:{frame.f_lineno}"
        if at >= 0:
            name = f"{path[at + 1 :]}:{frame.f_lineno}"
            if len(found) < FOLDER_FRAMES:
                found.append(name)
            if coroutine is None and frame.f_code.co_flags & _ASYNC:
                coroutine = name
        elif "/tests/" in path:
            tests = True
        frame = frame.f_back
    if not found or (tests and coroutine is None):
        return None
    if coroutine is not None and coroutine not in found:
        found.append(f"... {coroutine}")
    return " <- ".join(found)


@contextmanager
def statements_on_the_loop(engine: Engine, module: str) -> Iterator[list[str]]:
    """While open, collects "<caller>: <statement>" for each statement `engine` executes on
    a thread with a running event loop while `module` ("bot/lifecycle/budget.py", or a
    folder: "bot/lifecycle/") is on that thread's stack. A coroutine's frames are on its
    loop's stack while it runs, so a synchronous call from any coroutine of the module
    counts, however deep. Work handed to `Database.run` runs on a worker thread, whose
    stack starts there: it is not counted. Cheap where most statements run (a thread with
    no loop: the stack is not looked at)."""
    seen: list[str] = []

    def _seen(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if asyncio._get_running_loop() is None:
            return
        caller = _caller(sys._getframe(1), module)
        if caller is not None:
            seen.append(f"{caller}: {' '.join(statement.split())[:80]}")

    event.listen(engine, "before_cursor_execute", _seen)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", _seen)
