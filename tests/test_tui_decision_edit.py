"""A Decision draft edited with `D` is what shows and what `P` publishes, also after a live
update re-reads the open transcript (a resync after the events stream re-opened, a task
result reaching the chat): the edit lives in the TUI only until it is published."""

from __future__ import annotations

from textual.widgets import TextArea

from tests.conftest import ApiClient
from tests.fakes.tui import ready, replies, send, status, until
from tests.fakes.tui_openings import discuss_draft
from tui_client.modals import DecisionEditor
from tui_client.transcript import AssistantMessage

EDITED = "Roll out one zone at a time — ünïcødé ✓"


def shown_draft(message: AssistantMessage) -> str:
    return str(message.query_one(".decision").render())


async def test_an_edited_draft_shows_and_survives_a_live_refresh_of_the_transcript(
    api: ApiClient,
) -> None:
    async with discuss_draft(api, 7) as drafted:
        app, pilot, message = drafted.app, drafted.pilot, drafted.message
        app.chat.composer.focus()
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, DecisionEditor), "the editor")
        app.screen.query_one(TextArea).text = EDITED
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, DecisionEditor), "the edit kept")
        # The box under the reply is the draft P publishes: it shows the edit.
        await until(pilot, lambda: EDITED in shown_draft(message), lambda: shown_draft(message))
        assert "blue-green" not in shown_draft(message)
        # A live update re-reads the open session (the service still has the drafted text).
        app.chat.refresh_transcript()
        await until(
            pilot, lambda: bool(replies(app)) and replies(app)[-1] is not message, "the re-read"
        )
        await ready(pilot, app)
        assert app.chat.state.decision_body == EDITED
        assert EDITED in shown_draft(replies(app)[-1])
        assert status(app) == "Chat · Decision draft · P publish to #7"
        # The next turn's answer carries the service's draft too: the edit stands.
        await send(pilot, app, "what else should we check?")
        assert app.chat.state.decision_body == EDITED
        assert status(app) == "Chat · Decision draft · P publish to #7"
