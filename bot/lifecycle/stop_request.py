"""A stop asked for while a worker starts: SIGTERM or SIGINT before RQ's handlers are in.

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

The handler only sets attributes: it runs between two bytecodes of the main thread, which
may hold a lock the handler would need (`threading.Event.set` inside an `Event.wait`
deadlocks), so waits poll `requested` instead.
"""

from __future__ import annotations

import os
import signal
import time
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
        """Take SIGTERM and SIGINT (main thread only, as Python requires of handlers)."""
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._remember)
        # A process forked meanwhile (RQ's scheduler) must not swallow the SIGTERM its
        # parent stops it with before it installs its own handlers.
        os.register_at_fork(after_in_child=self._default_in_child)
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
