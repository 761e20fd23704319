"""Pasting several lines into the composer (a traceback, a log excerpt): Textual's Input
keeps only the first line of a paste, so the rest was dropped without a word and the
message went without it. The composer keeps every line (each break shown as `⏎` in its one
line) and sends them as they were pasted."""

from __future__ import annotations

from textual import events

from tests.conftest import ApiClient
from tests.fakes.tui import SIZE, ready, stored_user_messages, tui, until, user_messages

PASTED = (
    'Why does this fail?\nTraceback (most recent call last):\n  File "app.py", line 3\nKeyError: 1'
)


async def test_a_pasted_traceback_is_sent_whole_with_its_line_breaks(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        composer = app.chat.composer
        composer.focus()
        composer.value = "Look: "
        composer.cursor_position = len(composer.value)
        composer.post_message(events.Paste(PASTED))
        await until(pilot, lambda: "KeyError" in composer.value, "the whole paste")
        assert composer.value == "Look: " + PASTED.replace("\n", "⏎")
        await pilot.press("enter")
        await until(pilot, lambda: bool(user_messages(app)) and not app.chat.state.busy, "sent")
        assert user_messages(app) == ["Look: " + PASTED]
        stored = await stored_user_messages(api, app.chat.state.session_id)
        assert stored == ["Look: " + PASTED]
