"""The TUI told that frames of a turn were not relayed (a `status` frame with `reason:
frames_lost`, as a re-attach through another instance gives where Redis lost them,
bot/chat/frames.py): a warning under the reply, kept once the turn ends, said once however
often the stream repeats it (real service, its chat stream given the frame, headless Textual)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.chat.frames import LOST_TEXT
from bot.contracts.chat import StatusReason
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import SIZE, NewerChatStream, plain_tui, ready, send
from tui_client.transcript import Notice

LOST = {"type": "status", "text": LOST_TEXT, "reason": StatusReason.FRAMES_LOST}


async def test_frames_lost_stays_as_a_warning_under_the_reply(
    api_factory: Any, tmp_path: Path
) -> None:
    lossy = NewerChatStream(LOST, LOST)
    runtime = ScriptedRuntime([reply("The build is **green**.")])
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=lossy.plugins()
    )
    app = plain_tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "is the build green?")
        assert lossy.sent == 1
        assert message.reply.source == "The build is **green**."
        warnings = list(message.query(Notice))
        assert [(n.text, n.kind) for n in warnings] == [(LOST_TEXT, "warning")]
        children = list(message.children)
        assert children.index(warnings[0]) > children.index(message.reply)  # under the reply
        assert not message.has_class("failed")
