"""The web GUI sends one idempotency key per message and the same key when it sends that
message again (docs/api.md, "One turn per key"): a send whose answer was lost after the
service took it (the connection reset) is sent again with Retry and runs no second turn;
the reply shown is the first turn's. Before, Retry ran the message a second time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from tests.browser.conftest import GuiFactory
from tests.browser.lost_sends import open_chat, send_first_lost
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime


async def test_retry_after_a_lost_answer_runs_the_message_once(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    runtime = ScriptedRuntime([[Delta("The answer, once.")], [Delta("A second turn!")]])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    page = gui.page
    sends, lost = await send_first_lost(page, "answer me once", answer_only=True)
    await lost.locator("button", has_text="Retry").click()
    await gui.wait_done()

    await page.locator("#messages .msg.assistant", has_text="The answer, once.").wait_for()
    keys = [key for key, _ in sends.sent]
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
    assert len(runtime.requests) == 1
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert [s["turns"] for s in sessions] == [2]


async def test_retry_after_opening_another_chat_sends_to_the_first_with_its_key(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The answer is lost, the operator opens another chat, then presses Retry: the message
    goes again to the chat it was sent in, with its key, so the turn the service ran for it
    is the one shown, and the chat open meanwhile gets no turn. Before, Retry sent what the
    box held to the chat then open, with a new key: a second turn ran there."""
    runtime = ScriptedRuntime([[Delta("The answer, once.")], [Delta("A second turn!")]])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    first = (await (await api.post("/api/operator/chat/new", json={"title": "first"})).json())["id"]
    other = (await (await api.post("/api/operator/chat/new", json={"title": "other"})).json())["id"]
    gui = await gui_factory(api)
    page = gui.page
    await open_chat(page, first)
    sends, lost = await send_first_lost(page, "answer me once", answer_only=True)
    await open_chat(page, other)
    await lost.locator("button", has_text="Retry").click()
    await page.locator("#messages .msg.assistant", has_text="The answer, once.").wait_for()
    await gui.wait_done()

    [(key, body), (again, resent)] = sends.sent
    assert key and again == key and body["session"] == first and resent == body
    # The model drafted one answer (its other calls summarise a chat left behind).
    asked = [r for r in runtime.requests if r.messages[-1].content == "answer me once"]
    assert len(asked) == 1
    assert await page.get_attribute("#session-list .session.current", "data-session") == first
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert {s["id"]: s["turns"] for s in sessions} == {first: 2, other: 0}
