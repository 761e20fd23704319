"""A message sent from a fresh page, with no chat open, that never reached the service, and
retried after the operator opened a chat meanwhile, goes to a new chat, as it would have
when first sent, with its key and its body as sent; the chat opened meanwhile gets nothing.
Before, Retry sent it to the chat open then (a message naming no chat goes to the open one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta
from tests.browser.conftest import GuiFactory
from tests.browser.lost_sends import open_chat, send_first_lost
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime


async def test_retry_of_a_first_message_after_opening_a_chat_goes_to_a_new_chat(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    runtime = ScriptedRuntime([[Delta("The answer.")]])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    page = gui.page
    sends, lost = await send_first_lost(page, "a first question", answer_only=False)
    # A chat made meanwhile (another tab) is listed here; the operator opens it.
    made = await api.post("/api/operator/chat/new", json={"title": "other"})
    other = (await made.json())["id"]
    await open_chat(page, other)
    await lost.locator("button", has_text="Retry").click()
    await page.locator("#messages .msg.assistant", has_text="The answer.").wait_for()
    await gui.wait_done()

    [(key, body), (again, resent)] = sends.sent
    assert key and again == key and resent == body and "session" not in body
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    turns = {s["id"]: s["turns"] for s in sessions}
    assert turns.pop(other) == 0
    [(new, count)] = turns.items()
    assert count == 2
    assert await page.get_attribute("#session-list .session.current", "data-session") == new


async def test_a_retry_answered_from_the_chat_the_service_made_leaves_no_spare_chat(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The first message from a fresh page reached the service (which made a chat for it and
    ran its turn) but its answer was lost; the operator opened another chat, then pressed
    Retry. The Retry makes a new chat, as for a message that never arrived, but its key
    joins the turn already run: the answer comes from the service's chat, and the new one,
    left empty, is deleted again. Before, it stayed (the API and the TUI list it)."""
    runtime = ScriptedRuntime([[Delta("The answer, once.")], [Delta("A second turn!")]])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    page = gui.page
    sends, lost = await send_first_lost(page, "a first question", answer_only=True)
    made = await api.post("/api/operator/chat/new", json={"title": "other"})
    other = (await made.json())["id"]
    await open_chat(page, other)
    spare_deleted = page.expect_response(
        lambda r: r.request.method == "DELETE" and "/api/operator/chat/session/" in r.url
    )
    async with spare_deleted as deleted:
        await lost.locator("button", has_text="Retry").click()
        await page.locator("#messages .msg.assistant", has_text="The answer, once.").wait_for()
        await gui.wait_done()
    assert (await deleted.value).status == 200

    asked = [r for r in runtime.requests if r.messages[-1].content == "a first question"]
    sent = [body for _, body in sends.sent]
    assert len(asked) == 1 and "session" not in sent[0] and sent[1] == sent[0]
    current = await page.get_attribute("#session-list .session.current", "data-session")
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert {s["id"]: s["turns"] for s in sessions} == {current: 2, other: 0}
