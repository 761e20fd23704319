"""What the operator was typing survives a reload of the tab: the composer holds it again
(a message sent is not brought back), another operator signing in on the tab never sees it,
and Sign out forgets it (docs/gui.md "Composer"). So do a focus and an agent switch not sent
yet, and the Decision draft as edited and not published (docs/gui.md "Decision and Publish
bar")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import Gui, GuiFactory
from tests.conftest import make_settings
from tests.fakes.lifecycle import DECISION, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

DRAFT = "The export job fails on Mondays because\nthe fx table"
# What the tab kept as it went, read as the reloaded page starts (before its modules take it).
KEPT_AT_LOAD = """window.keptAtLoad = Object.keys(sessionStorage)
  .filter((k) => k.startsWith('steelframe:draft:'))
  .map((k) => JSON.parse(sessionStorage.getItem(k)));"""


async def kept_at_load(gui: Gui) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = await gui.page.evaluate("() => window.keptAtLoad")
    return kept


async def reload_chat(gui: Gui) -> None:
    await gui.page.reload()
    await gui.page.wait_for_selector("#messages .msg.assistant")


async def test_a_reload_keeps_the_unsent_message(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await page.fill("#message", DRAFT)
    await page.reload()
    await page.wait_for_selector("#app:not([hidden])")
    await page.wait_for_function("() => document.querySelector('#message').value !== ''")
    assert await page.input_value("#message") == DRAFT

    # Sent, it is no draft: the next reload brings an empty box.
    await page.press("#message", "Enter")
    await gui.wait_done()
    await page.reload()
    await page.wait_for_selector("#messages .msg.assistant")
    assert await page.input_value("#message") == ""

    # Another operator on this tab never sees it; Sign out forgets it.
    await page.fill("#message", "only mine")
    await page.click("#sign-out")
    await page.wait_for_selector("#signin:not([hidden])")
    other = api.new_operator("other")
    await page.reload()
    await page.wait_for_selector("body[data-ready=true]")
    await gui.sign_in(other.token)
    assert await page.input_value("#message") == ""
    await page.click("#sign-out")
    await page.wait_for_selector("#signin:not([hidden])")  # signed out before signing in
    await gui.sign_in()
    assert await page.input_value("#message") == ""


async def test_a_reload_keeps_a_focus_set_but_not_yet_sent(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """A focus goes with the next message (the API's rule): set and not yet sent, a reload
    lost it, and the message kept in the box then went without it."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("a chat to come back to")
    await gui.wait_done()
    await page.fill("#focus-input", "7")
    await page.click("#focus-form button")
    await page.fill("#message", "what blocks #7?")
    await page.reload()
    await page.wait_for_selector("#messages .msg.assistant")
    await page.wait_for_selector("#focus-chip:not([hidden])")
    assert await page.inner_text("#focus-text") == "focus: #7"
    await page.press("#message", "Enter")
    await gui.wait_done()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert sessions[0]["focus"] == 7


async def test_a_reload_keeps_an_agent_switch_not_yet_sent(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """An agent switch goes with the next message (the API's rule): switched and not yet
    sent, a reload lost it, and the next message went to the chat's old agent."""
    settings = make_settings(tmp_path, agents_json={"ops": {"repo": "steelframe-dev/ops"}})
    api = await api_factory(settings, runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await page.add_init_script(KEPT_AT_LOAD)
    await gui.send("a chat to come back to")
    await gui.wait_done()
    await page.select_option("#agent-select", "ops")
    await reload_chat(gui)
    assert await page.input_value("#agent-select") == "ops"
    await gui.send("now as ops")
    await gui.wait_done()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert sessions[0]["agent"] == "ops"
    # Sent, it is no longer kept: the next reload finds nothing of it.
    await reload_chat(gui)
    assert [k for k in await kept_at_load(gui) if k.get("agent")] == []


async def test_a_reload_keeps_the_decision_draft_as_edited_until_published(
    make: Make, gui_factory: GuiFactory
) -> None:
    """The Publish bar's edit survives a reload, and what is published is the edit; once
    published it is not kept. Discarded (the focus changed) it is not kept either."""
    lc = await make()
    issue = await lc.open_issue("Add a cache", pickup=False)
    gui = await gui_factory(lc.api)
    page = gui.page
    await page.add_init_script(KEPT_AT_LOAD)
    await page.fill("#focus-input", str(issue))
    await page.click("#focus-form button")
    await gui.send("draft a decision: Use Redis.")
    await gui.wait_done()
    await page.wait_for_selector("#publish-bar:not([hidden])")
    edited = "Use Redis, with a five minute expiry."
    await page.fill("#decision-text", edited)
    await reload_chat(gui)
    await page.wait_for_selector("#publish-bar:not([hidden])")
    assert await page.input_value("#decision-text") == edited
    await page.click("#publish")
    await page.wait_for_selector("#publish-bar", state="hidden")
    marked = [c["body"] for c in await lc.comments(issue) if c["body"].startswith(DECISION)]
    assert len(marked) == 1 and edited in marked[0]
    await reload_chat(gui)
    assert [k for k in await kept_at_load(gui) if k.get("decision")] == []
    assert await page.is_hidden("#publish-bar")

    # A new draft, edited, then discarded by a focus change: the reload brings no edit back.
    await gui.send("draft a decision: Use SQLite.")
    await gui.wait_done()
    await page.wait_for_selector("#publish-bar:not([hidden])")
    await page.fill("#decision-text", "Use SQLite, in WAL mode.")
    await page.click("#focus-clear")
    await reload_chat(gui)
    assert [k for k in await kept_at_load(gui) if k.get("decision")] == []
