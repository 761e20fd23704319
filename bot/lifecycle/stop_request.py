"""A stop asked for while a worker starts: SIGTERM or SIGINT before RQ's handlers are in.

RQ installs its handlers only once `work()` has registered the worker, subscribed to its
command channel and started its scheduler. Until then Python's defaults applied: a SIGTERM
(an orchestrator scaling down, a deploy replacing the worker) killed the process outright,
mid-migration or mid-reconcile, and left its worker record in Redis. `StopRequest` holds
both signals from the start of `steelframe worker`, so start-up finishes what it is doing,
and the worker's loop then leaves at its first turn (a warm shutdown, deregistered). A
second signal stops the process at once, as RQ's own handlers do: a person pressing Ctrl+C
twice on a start-up step that hangs (a database that does not answer) is not kept waiting.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Remembers a stop signal from `install()` until RQ's handlers replace this one."""

    def __init__(self) -> None:
        self.event = threading.Event()  # for waits that a stop should cut short
        self.signal_name = ""

    def install(self) -> StopRequest:
        """Take SIGTERM and SIGINT (main thread only, as Python requires of handlers)."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._remember)
        return self

    def _remember(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():  # the second: die of it, as without this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signal_name = signal.Signals(signum).name
        self.event.set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()
