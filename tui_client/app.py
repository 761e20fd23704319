"""The Steelframe TUI application: Chat and Board tabs over one operator API client."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Header, TabbedContent, TabPane

from tui_client.api import OperatorClient
from tui_client.board import BoardPanel
from tui_client.chat import ChatPanel


class SteelframeApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "Steelframe"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "show_tab('chat')", "Chat"),
        Binding("f2", "show_tab('board')", "Board"),
        Binding("ctrl+r", "refresh", "Refresh"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, client: OperatorClient) -> None:
        super().__init__()
        self.client = client
        self.sub_title = client.base_url

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="chat"):
            with TabPane("Chat", id="chat"):
                yield ChatPanel(self.client, id="chat-panel")
            with TabPane("Board", id="board"):
                yield BoardPanel(self.client, id="board-panel")
        yield Footer()

    @property
    def chat(self) -> ChatPanel:
        return self.query_one(ChatPanel)

    @property
    def board(self) -> BoardPanel:
        return self.query_one(BoardPanel)

    def on_mount(self) -> None:
        self.chat.composer.focus()

    async def on_unmount(self) -> None:
        await self.client.close()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        if tab == "chat":
            self.chat.composer.focus()
        else:
            self.board.table.focus()

    def action_refresh(self) -> None:
        self.chat.load_sessions(open_active=True)
        self.board.load()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "board":
            self.board.load()

    @on(BoardPanel.Discuss)
    def _discuss(self, event: BoardPanel.Discuss) -> None:
        self.query_one(TabbedContent).active = "chat"
        self.chat.start_discuss(event.issue)
