"""The reply's `retrieve N hits` row says when session memory has nothing that answers the
question (docs/memory.md, "When memory does not answer"), as the TUI's row does: live, and
the same after a reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings
from tests.test_grounding_verdict import ANSWERABLE, CHUNKS, NO_ANSWER
from tui_client.transcript import hits_title

ROWS = (
    "() => [...document.querySelectorAll('#messages .msg.assistant .hits summary')]"
    ".map(s => s.textContent)"
)


def hits(n: int) -> str:
    return f"retrieve {n} {'hit' if n == 1 else 'hits'}"


async def test_the_hits_row_says_when_nothing_in_memory_answers(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    assert api.services.memory is not None
    api.services.memory.add(CHUNKS)
    gui = await gui_factory(api)
    page = gui.page

    await gui.send(NO_ANSWER)
    await gui.wait_done()
    await gui.send(ANSWERABLE)
    await gui.wait_done()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    session = await (await api.get(f"/api/operator/chat/session/{sessions[0]['id']}")).json()
    replies = [m["meta"] for m in session["messages"] if m["role"] == "assistant"]
    assert [m["memory_verdict"] for m in replies] == ["nothing", "answers"]
    nothing, answers = (m["retrieve_hits"] for m in replies)
    assert nothing and answers  # both rows are shown: memory had hits each time

    live = await page.evaluate(ROWS)
    # The words after the count are the TUI's own (its "hits" is plural whatever the count).
    said = hits_title(nothing, nothing, "nothing").split(" · ", 1)[1]
    assert said == "nothing answers this: closest, not an answer"
    assert live == [f"{hits(nothing)} · {said}", hits(answers)]
    await page.reload()
    await page.locator("#messages .msg.assistant .hits").nth(1).wait_for()
    assert await page.evaluate(ROWS) == live


async def test_the_hits_row_says_when_it_lists_recent_summaries(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """With no semantic hits the turn is given recent session summaries instead (the spec's
    recency fallback): the row says so, as the TUI's does, not "retrieve 0 hits" over a list
    of entries."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("Why does the export job fail on Mondays?")
    await gui.wait_done()
    await page.keyboard.press("Control+k")  # the first chat is summarised in the background
    await page.locator("#messages #chat-empty").wait_for()
    await api.services.background.drain()
    await gui.send("line one line two")
    await gui.wait_done()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    session = await (await api.get(f"/api/operator/chat/session/{sessions[0]['id']}")).json()
    meta = session["messages"][-1]["meta"]
    listed = len(meta["retrieved"])
    assert meta["retrieve_hits"] == 0 and listed  # the recency fallback, as asked

    live = await page.evaluate(ROWS)
    assert live == [hits_title(0, listed)]
    assert live == [
        f"retrieve 0 hits · (no semantic hits) {listed} recent summar"
        + ("y" if listed == 1 else "ies")
    ]
    await page.reload()
    await page.locator("#messages .msg.assistant .hits").wait_for()
    assert await page.evaluate(ROWS) == live
