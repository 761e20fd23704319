"""The web GUI on a turn that ended in an `error` frame: stopped by the operator it says so
(tests/browser/test_gui_chat.py), failed it names the reason's word (ERROR_REASON,
web_gui/static/wire.js, generated from bot/contracts/chat.py), and a frame without one (a
turn relayed by another release whose word this one does not know: bot/chat/frames.py
reads it without its reason) says the turn failed without a word in place of one (real
service, Chromium)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.contracts.chat import ErrorReason
from bot.runtimes.base import RuntimeError_
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import NewerChatStream
from tests.test_error_reasons import FailingRuntime

FAILED = "#messages .msg.assistant.stopped .body"


async def test_a_failed_turn_names_its_reason(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    runtime = FailingRuntime(RuntimeError_("the model refused the request"))
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    await gui.send("a question")
    await gui.wait_done()
    said = await gui.page.locator(FAILED).inner_text()
    word = ErrorReason.RUNTIME.value
    assert said == f"The turn failed ({word}): the model refused the request. Try again."
    assert await gui.page.inner_text("#status-line") == "failed"


async def test_an_error_frame_without_a_reason_says_the_turn_failed(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    relayed = NewerChatStream({"type": "error", "error": "the turn was over budget"})
    runtime = ScriptedRuntime([reply("never shown")], gate=asyncio.Event())
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=relayed.plugins()
    )
    gui = await gui_factory(api)
    await gui.send("a question")
    await gui.wait_done()
    said = await gui.page.locator(FAILED).inner_text()
    assert said == "The turn failed: the turn was over budget. Try again."
    assert await gui.page.inner_text("#status-line") == "failed"
    await api.post("/api/operator/chat/stop")  # the service's own turn, still held
