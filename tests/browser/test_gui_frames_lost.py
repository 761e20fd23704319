"""The web GUI told that frames of a turn were not relayed (a `status` frame with `reason:
frames_lost`, as a re-attach through another instance gives where Redis lost them,
bot/chat/frames.py): a warning under that reply, kept once the turn ends, said once however
often the stream repeats it, its text shown as text (real service, its chat stream given the
frame as `NewerChatStream` gives the TUI's tests, Chromium)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.chat.frames import LOST_TEXT
from bot.contracts.chat import StatusReason
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import NewerChatStream

REPLY = "The build is green."
NOTES = (
    "() => [...document.querySelectorAll('#messages .msg.assistant')].map(m => ({"
    " body: m.querySelector('.body').innerText.trim(),"
    " notes: [...m.querySelectorAll('.lost-note')].map(n => ({"
    "   text: n.textContent, role: n.getAttribute('role'),"
    "   under: !!(m.querySelector('.body').compareDocumentPosition(n)"
    "     & Node.DOCUMENT_POSITION_FOLLOWING),"
    "   children: n.children.length }))"
    "}))"
)


def _lost(text: str = LOST_TEXT) -> dict[str, Any]:
    return {"type": "status", "text": text, "reason": StatusReason.FRAMES_LOST}


async def test_frames_lost_stays_as_a_warning_under_the_reply(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    lossy = NewerChatStream(_lost(), _lost())
    runtime = ScriptedRuntime([reply(REPLY)])
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=lossy.plugins()
    )
    gui = await gui_factory(api)
    await gui.send("is the build green?")
    await gui.wait_done()
    assert lossy.sent == 1
    warning = {"text": f"Warning: {LOST_TEXT}", "role": "note", "under": True, "children": 0}
    assert await gui.page.evaluate(NOTES) == [{"body": REPLY, "notes": [warning]}]
    assert await gui.axe() == []
    # The sign-in page's own 401 (no session yet), nothing else.
    assert [e for e in gui.console_errors if "401" not in e] == []


async def test_a_frames_lost_text_is_shown_as_text(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    markup = '<img src=x onerror="window.pwned = 1"> <b>lost</b>'
    lossy = NewerChatStream(_lost(markup))
    runtime = ScriptedRuntime([reply(REPLY)])
    api = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=lossy.plugins()
    )
    gui = await gui_factory(api)
    await gui.send("is the build green?")
    await gui.wait_done()
    warning = {"text": f"Warning: {markup}", "role": "note", "under": True, "children": 0}
    assert await gui.page.evaluate(NOTES) == [{"body": REPLY, "notes": [warning]}]
    assert await gui.page.evaluate("() => window.pwned === undefined")
