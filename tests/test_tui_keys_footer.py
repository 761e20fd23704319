"""The footer of keys: rebuilt when the keys it shows change, and only then."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Input
from textual.widgets._footer import FooterKey

from tests.fakes.tui import SIZE, until
from tui_client.chat_widgets import SessionList
from tui_client.keys_footer import KeysFooter


class _KeysApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Input(id="one")
        yield Input(id="two")
        yield SessionList()
        yield KeysFooter()


def _actions(app: App[None]) -> list[str]:
    return [key.action for key in app.query(FooterKey)]


async def test_the_footer_is_rebuilt_only_when_its_keys_change() -> None:
    app = _KeysApp()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#one").focus()
        await until(pilot, lambda: "command_palette" in _actions(app), "the footer's keys")
        keys = list(app.query(FooterKey))
        # Another input shows the same keys: the footer keeps its widgets (Textual's own
        # rebuilt them all on every focus change).
        app.query_one("#two").focus()
        for _ in range(3):
            await pilot.pause()
        assert list(app.query(FooterKey)) == keys
        # The list has keys of its own: shown, and gone again with the focus.
        app.query_one(SessionList).focus()
        await until(pilot, lambda: "delete_session" in _actions(app), "the list's keys")
        app.query_one("#one").focus()
        await until(pilot, lambda: "delete_session" not in _actions(app), "the list's keys gone")
        assert _actions(app) == [key.action for key in keys]
