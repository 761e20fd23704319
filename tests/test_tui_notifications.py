"""Notifications never sit over the controls: in an 80x24 terminal Textual's toasts (bottom
right) covered half the composer and the status line ("esc stop", "P publish") for 8 s,
hiding what was being typed; they show at the top right, over the transcript, as the web
GUI keeps its notifications off Send, Stop and Publish (docs/gui.md)."""

from __future__ import annotations

from textual.widgets._toast import Toast

from tests.conftest import ApiClient
from tests.fakes.tui import ready, tui, until

NARROW = (80, 24)


async def test_notifications_leave_the_composer_and_the_status_line_in_view(
    api: ApiClient,
) -> None:
    app = tui(api)
    async with app.run_test(size=NARROW, notifications=True) as pilot:
        await ready(pilot, app)
        app.tell("#12 (Fix the flaky login test in the nightly pipeline) delivered: https://x/13")
        app.tell("#14: answering 2 review threads")
        app.tell("#15 waits for information: which database should the migration target?")
        await until(pilot, lambda: len(app.screen.query(Toast)) == 3, "the notifications")
        controls = [app.chat.composer, app.chat.query_one("#status-line"), *app.screen.query("Tab")]
        for toast in app.screen.query(Toast):
            assert toast.region.height > 0
            for control in controls:
                assert not toast.region.overlaps(control.region), (toast.region, control)
