"""The TUI in a session with a service newer than it: frames of a type it does not know are
skipped, a frame of a known type it cannot read is said in the reply, and the turn ends as
it would have (real service, real HTTP, headless Textual)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, NewerChatStream, plain_tui, ready, send, stored_user_messages
from tui_client.transcript import Notice

UNREADABLE = (
    "The service sent a `thinking` frame this TUI cannot read:"
    " Expected `str`, got `int` - at `$.text`"
)


async def test_a_newer_services_frames_are_skipped_or_said_and_the_turn_ends(
    api_factory: Any, tmp_path: Path
) -> None:
    newer = NewerChatStream(
        {"type": "plan", "steps": ["read the logs", "reply"]},  # a type this TUI lacks
        {"type": "thinking", "text": 7, "draft": 1},  # a type it has, in a shape it cannot read
    )
    runtime = ScriptedRuntime([reply("The build is **green**.")])
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=newer.plugins()
    )
    app = plain_tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "is the build green?")
        assert newer.sent == 1  # the stream did carry both
        assert message.reply.source == "The build is **green**."
        assert [notice.text for notice in message.query(Notice)] == [UNREADABLE]
        assert not message.has_class("failed")
        # The turn ended on the service too: the next message is a turn of its own.
        again = await send(pilot, app, "and the deploy?")
        assert again.reply.source == "The build is **green**." and newer.sent == 2
        assert not again.has_class("failed")
        session = app.chat.state.session_id
    assert await stored_user_messages(api, session) == ["is the build green?", "and the deploy?"]
