"""The conversation is a live region (`role="log"`): while a reply streams into it, it is
`aria-busy`, so a screen reader announces the reply once when the turn ends, not token by
token; the turn ending in any way (done, an error, Stop) clears it (real service, Chromium;
a connection lost for good: tests/browser/test_gui_chat.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta, RuntimeError_, Thinking
from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime
from tests.test_error_reasons import FailingRuntime

BUSY = "#messages[aria-busy=true]"
WATCH = """() => {
  window.replyChanges = [];
  const box = document.querySelector('#messages');
  new MutationObserver(() => {
    const body = box.querySelector('.msg.assistant .body');
    if (body) window.replyChanges.push([body.textContent, box.getAttribute('aria-busy')]);
  }).observe(box, { childList: true, subtree: true, characterData: true });
}"""


async def busy(gui: Gui) -> str | None:
    value: str | None = await gui.page.get_attribute("#messages", "aria-busy")
    return value


async def test_the_conversation_is_busy_while_the_reply_streams_and_not_after(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    pieces = [Delta("the first words "), Delta("and the rest")]
    runtime = ScriptedRuntime([pieces], gate=gate, delay=0.5)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    assert await busy(gui) is None
    # What the reply's text was at each change, and whether the conversation was busy then.
    await gui.page.evaluate(WATCH)
    await gui.send("a question")
    await gui.page.wait_for_selector(BUSY)  # from the send, before the first token
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)
    gate.set()
    await gui.wait_done()
    seen = await gui.page.evaluate("() => window.replyChanges")
    partial = [b for text, b in seen if "the first words" in text and "and the rest" not in text]
    assert partial and all(b == "true" for b in partial), seen
    reply = await gui.page.inner_text("#messages .msg.assistant .body")
    assert "the first words and the rest" in reply
    assert await busy(gui) is None  # the whole reply is announced now


async def test_a_stopped_turn_clears_busy(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    runtime = ScriptedRuntime([[Thinking("pondering"), Delta("never shown")]], gate=asyncio.Event())
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    await gui.send("a long question")
    await gui.page.wait_for_selector(BUSY)
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)
    await gui.page.click("#stop")
    await gui.page.locator("#messages .msg.assistant.stopped").wait_for()
    await gui.wait_done()
    assert await busy(gui) is None


async def test_a_failed_turn_clears_busy(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    runtime = FailingRuntime(RuntimeError_("the model refused the request"))
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    await gui.send("a question")
    await gui.page.locator("#messages .msg.assistant.stopped").wait_for()
    await gui.wait_done()
    assert await busy(gui) is None
