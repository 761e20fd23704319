"""A stop asked for while a process starts: SIGTERM or SIGINT before its own handling is in
(RQ's handlers in `steelframe worker`, the event loop's in `steelframe serve`).

RQ installs its handlers only once `work()` has registered the worker, subscribed to its
command channel and started its scheduler. Until then Python's defaults applied: a SIGTERM
(an orchestrator scaling down, a deploy replacing the worker) killed the process outright,
mid-migration or mid-reconcile, and inside `work()` it left the worker's record in Redis.
`StopRequest` holds both signals from the start of `steelframe worker`, so start-up finishes
what it is doing, and the worker's loop then leaves at its first turn (a warm shutdown,
deregistered).

A second signal ends the process at once, by the signal's default action: a person pressing
Ctrl+C twice on a start-up step that hangs (a database that does not answer) is not kept
waiting. As in RQ's own handlers, a second one within DUPLICATE_SECONDS of the first is
taken for the same stop delivered twice (a supervisor forwarding it beside the terminal's).

`steelframe serve` holds them the same way until its loop takes them over, and again once
the loop has closed (asyncio puts Python's defaults back then, and a KeyboardInterrupt raised
during the interpreter's teardown was printed as "Exception ignored in ..."). A supervisor
(`serve --processes`) starts its children with both signals blocked (`stop_signals_blocked`):
one it forwards before a child's interpreter is even up stays pending until `install()`
unblocks it into this handler, instead of killing the child at whatever point it had reached.

The handler only sets attributes: it runs between two bytecodes of the main thread, which
may hold a lock the handler would need (`threading.Event.set` inside an `Event.wait`
deadlocks), so waits poll `requested` instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
DUPLICATE_SECONDS = 1.0


class StopRequest:
    """Remembers a stop signal from `install()` until RQ's handlers replace this one, or
    `restore()` puts back the handlers it found."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = ""
        self._at = 0.0
        self._previous: dict[int, Any] = {}

    def install(self) -> StopRequest:
        """Take SIGTERM and SIGINT (main thread only, as Python requires of handlers), then
        receive any the parent held back. Again after another handler's time (an event loop's)
        holds them once more; `restore()` still puts back what the first call found."""
        first = not self._previous
        for signum in STOP_SIGNALS:
            previous = signal.signal(signum, self._remember)
            self._previous.setdefault(signum, previous)
        if first:
            # A process forked meanwhile (RQ's scheduler) must not swallow the SIGTERM its
            # parent stops it with before it installs its own handlers.
            os.register_at_fork(after_in_child=self._default_in_child)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return self

    def restore(self) -> None:
        """Put back the handlers `install()` found, where this one is still in place."""
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._remember:
                signal.signal(signum, previous)

    def _remember(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if not self.requested:
            self.requested, self.signal_name, self._at = True, signal.Signals(signum).name, now
        elif now - self._at >= DUPLICATE_SECONDS:  # asked again: end it now
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _default_in_child(self) -> None:
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) == self._remember:
                signal.signal(signum, signal.SIG_DFL)

    def wait(self, seconds: float, *, step: float = 0.1) -> bool:
        """Sleep up to `seconds`, less once a stop is requested; whether one was."""
        deadline = time.monotonic() + seconds
        while not self.requested and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(step, left))
        return self.requested


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """SIGTERM and SIGINT blocked in this thread meanwhile, so a process started here begins
    with them blocked (the mask survives `exec`) until its `StopRequest.install()`. What
    reaches this process meanwhile is delivered when the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
