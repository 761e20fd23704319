"""A message the service never took (unreachable, or its turn refused before any frame):
the TUI gives it back in the composer, with the focus change it was to carry, so the
operator sends it again with one key instead of typing it again (as the web GUI does)."""

from __future__ import annotations

from tests.conftest import ApiClient
from tests.fakes.tui import SIZE, notices, send, status, tui, until
from tests.fakes.tui_openings import unreachable_at_start
from tui_client.modals import IssuePrompt
from tui_client.transcript import Notice

MESSAGE = "Why does the nightly build take 40 minutes — ünïcødé 日本語?"


async def test_a_message_the_unreachable_service_never_took_comes_back_to_the_composer(
    api: ApiClient,
) -> None:
    async with unreachable_at_start(api) as started:
        app, pilot = started.app, started.pilot
        app.chat.composer.focus()
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, IssuePrompt), "the focus prompt")
        await pilot.press("1", "2", "enter")
        message = await send(pilot, app, MESSAGE)
        said = message.query_one(Notice).text
        assert "cannot reach" in said and "back in the composer" in said, said
        assert app.chat.composer.value == MESSAGE
        assert status(app) == "Chat · service unreachable · ctrl+r retry"
        assert app.chat.state.focus_change == 12  # still to be sent with it
        # The service is back: ctrl+r, then enter sends the same message, with its focus.
        await started.come_up()
        await pilot.press("ctrl+r")
        await until(pilot, lambda: "unreachable" not in status(app), lambda: status(app))
        app.chat.composer.focus()
        await pilot.press("enter")
        await until(
            pilot, lambda: app.chat.composer.value == "" and not app.chat.state.busy, "sent"
        )
        await until(pilot, lambda: app.chat.state.session_id is not None, "its session")
        session = app.chat.state.session_id
        stored = await (await api.get(f"/api/operator/chat/session/{session}")).json()
        sent = [m["content"] for m in stored["messages"] if m["role"] == "user"]
        assert sent == [MESSAGE] and stored["focus"] == 12


async def test_a_turn_refused_before_it_started_leaves_its_text_in_the_composer(
    api: ApiClient,
) -> None:
    app = tui(api, token="sfo_not-the-token")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: bool(notices(app)), "the start-up error")
        message = await send(pilot, app, MESSAGE)
        assert "refused the operator token" in message.query_one(Notice).text
        assert app.chat.composer.value == MESSAGE


async def test_a_turn_that_streamed_does_not_come_back_to_the_composer(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: not app.chat.state.switching, "start-up")
        await send(pilot, app, "hello there")
        assert app.chat.composer.value == ""


async def test_a_message_refused_as_it_is_comes_back_without_offering_to_send_it_again(
    api: ApiClient,
) -> None:
    """Too long (a 400), it would be refused again: the words say to change it, not that
    enter sends it again (the web GUI offers no Retry for it either)."""
    too_long = "word " * 7000
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: not app.chat.state.switching, "start-up")
        message = await send(pilot, app, too_long)
        said = message.query_one(Notice).text
        assert said.startswith("message is longer than 32000 characters (400 bad_request)"), said
        assert "enter sends it again" not in said and "change it" in said, said
        assert app.chat.composer.value == too_long.rstrip()
