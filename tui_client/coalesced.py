"""A load that must show the newest state (the Board, the session list, the open transcript),
asked for from many places at any time: keys (ctrl+r, F2), the events stream, the timer that
reloads the lists once live updates stop, the end of a turn or of an action.

As an exclusive worker, each ask cancelled the load in flight and started another: on a
service slower to answer than the asks came (a timer tick, then ctrl+r; a burst of events)
the load never showed. Here one load runs at a time and no ask cancels it; an ask while it
runs has it loaded once more when it ends (once, however many asked meanwhile), so what
shows is never older than an ask, and the service is never asked twice at once.

A user action that replaces the previous one (open this chat, show this task) is not a load
of this kind: it stays an exclusive worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.widget import Widget
from textual.worker import Worker

from tui_client.failures import unless_unmounted


class CoalescedLoad:
    """`load` run as a worker of `widget` in `group` (the group names it in `app.workers`)."""

    def __init__(self, widget: Widget, group: str, load: Callable[[], Awaitable[None]]) -> None:
        self._widget = widget
        self._group = group
        self._load = load
        self._worker: Worker[None] | None = None  # the latest worker, running or ended
        self._again = False  # asked for while it ran: load once more after it

    @property
    def running(self) -> bool:
        """A load has not ended (started, or about to: a pending worker too)."""
        return self._worker is not None and not self._worker.is_finished

    def ask(self) -> None:
        """Load now, or once more after the load that runs."""
        if self.running:
            self._again = True
            return
        self._again = False
        self._worker = self._widget.run_worker(
            self._while_asked, group=self._group, name=getattr(self._load, "__name__", "")
        )

    async def _while_asked(self) -> None:
        await unless_unmounted(self._widget, self._loads())

    async def _loads(self) -> None:
        # (No await between reading `_again` and the worker's end: Textual marks a worker
        # finished as its coroutine returns, so an ask is either seen here or starts anew.)
        while True:
            self._again = False
            await self._load()
            if not self._again:
                return
