"""Esc closes what is open before it stops anything: a run modal (or the page's confirmation)
closed with Esc while a chat turn runs leaves the turn running, and the page's other keys
(`/`, Ctrl+K) leave the screen under an open dialog alone (docs/gui.md "Keyboard")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from tests.browser.conftest import WAIT_MS, GuiFactory
from tests.browser.test_gui_layout import seed_task
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime


async def test_esc_closing_a_dialog_leaves_the_running_turn_alone(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("the answer, all of it")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    seed_task(api, issue=12)
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("a question that takes a while")
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)

    # The run modal, then Terminate's confirmation in it: each Esc closes one dialog.
    await gui.screen("board")
    await page.click(".card[data-issue='12'] .card-open")
    await page.locator("#run-modal").wait_for(state="visible")
    await page.click("#run-actions button.danger")
    await page.locator("#confirm-dialog").wait_for(state="visible")
    await page.keyboard.press("Escape")
    await page.locator("#confirm-dialog").wait_for(state="hidden")
    # `/` and Ctrl+K do not change the screen under the open modal either.
    await page.keyboard.press("/")
    await page.keyboard.press("Control+k")
    assert await page.evaluate("document.body.dataset.screen") == "board"
    assert await page.is_visible("#run-modal")
    await page.keyboard.press("Escape")
    await page.locator("#run-modal").wait_for(state="hidden")

    await gui.screen("chat")
    assert await page.is_visible("#stop"), "the turn was stopped"
    assert not runtime.cancelled.is_set()
    gate.set()
    await gui.wait_done()
    reply = page.locator("#messages .msg.assistant").last
    assert "the answer, all of it" in await reply.inner_text()
    assert "stopped" not in (await reply.get_attribute("class") or "")
