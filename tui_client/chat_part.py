"""What each concern of the Chat panel (switching, the turn, the session list, drafts)
shares: the panel it works in, its state and widgets, and workers run on the panel.

Textual dispatches keys and messages to the widget (`ChatPanel`); the panel hands each to
the part that owns it. A part's network work runs as a worker of the panel, so a group's
`exclusive` cancels across parts as it did when they were one class.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ParamSpec

from textual.containers import VerticalScroll
from textual.worker import Worker

from tui_client.api import OperatorClient
from tui_client.chat_state import ChatState
from tui_client.chat_widgets import Composer, SessionList
from tui_client.failures import unless_unmounted

if TYPE_CHECKING:
    from tui_client.chat import ChatPanel

P = ParamSpec("P")


class ChatPart:
    def __init__(self, panel: ChatPanel) -> None:
        self.panel = panel

    @property
    def state(self) -> ChatState:
        return self.panel.state

    @property
    def client(self) -> OperatorClient:
        return self.panel.client

    @property
    def composer(self) -> Composer:
        return self.panel.composer

    @property
    def transcript(self) -> VerticalScroll:
        return self.panel.transcript

    @property
    def sessions(self) -> SessionList:
        return self.panel.sessions

    def run(
        self,
        group: str,
        work: Callable[P, Awaitable[None]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Worker[None]:
        """`work` as a worker of the panel in `group`; a newer one of an exclusive group
        (see EXCLUSIVE) cancels the one running."""
        panel = self.panel

        async def guarded() -> None:  # the coroutine is made when the worker starts
            await unless_unmounted(panel, work(*args, **kwargs))

        worker: Worker[None] = panel.run_worker(  # (annotated: mypy cannot infer it)
            guarded, group=group, exclusive=group in EXCLUSIVE, name=getattr(work, "__name__", "")
        )
        return worker


# One at a time: a newer request of these makes the running one's answer moot. (Not the
# loads that must show the newest state, the session list and the open transcript: an ask
# while one runs loads once more after it, see tui_client/coalesced.py. Nor a publish or a
# filing: a second one is not sent while the first waits, see Drafts._once.)
EXCLUSIVE = frozenset({"open", "turn"})
