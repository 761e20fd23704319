"""The web GUI told that frames of a turn were not relayed (a `status` frame with `reason:
frames_lost`, as a re-attach through another instance gives where Redis lost them,
bot/chat/frames.py): a warning under that reply, kept once the turn ends, said once however
often the stream repeats it, its text shown as text, and kept under the stored reply when
the chat was reloaded with it before the re-attached turn ended (real service, its chat
stream given the frame as `NewerChatStream` gives the TUI's tests, Chromium)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.chat.frames import LOST_TEXT
from bot.contracts.chat import StatusReason
from bot.contracts.events import SessionChange
from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.conftest import ApiClient, make_settings
from tests.fakes.events import EventsFeed
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    ChatStreamWrites,
    NewerChatStream,
    Write,
    after_first_frame,
    is_frame,
    sse_events,
)

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


def _warning(text: str) -> dict[str, Any]:
    """A frames-lost warning as NOTES reads it: its text as text, a note under the reply."""
    return {"text": f"Warning: {text}", "role": "note", "under": True, "children": 0}


async def _service(
    api_factory: Any,
    tmp_path: Path,
    streams: ChatStreamWrites,
    runtime: ScriptedRuntime | None = None,
) -> ApiClient:
    """The real service, its chat streams written through `streams`, answering REPLY."""
    runtime = runtime or ScriptedRuntime([reply(REPLY)])
    api: ApiClient = await api_factory(
        make_settings(tmp_path), runtimes=lambda agent: runtime, plugins=streams.plugins()
    )
    return api


async def _one_turn(api: ApiClient, gui_factory: GuiFactory) -> Gui:
    """A signed-in page that sent one message and was told the turn ended."""
    gui = await gui_factory(api)
    await gui.send("is the build green?")
    await gui.wait_done()
    return gui


async def test_frames_lost_stays_as_a_warning_under_the_reply(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    lossy = NewerChatStream(_lost(), _lost())
    gui = await _one_turn(await _service(api_factory, tmp_path, lossy), gui_factory)
    assert lossy.sent == 1
    assert await gui.page.evaluate(NOTES) == [{"body": REPLY, "notes": [_warning(LOST_TEXT)]}]
    assert await gui.axe() == []
    # The sign-in page's own 401 (no session yet), nothing else.
    assert [e for e in gui.console_errors if "401" not in e] == []


async def test_a_frames_lost_text_is_shown_as_text(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    markup = '<img src=x onerror="window.pwned = 1"> <b>lost</b>'
    lossy = NewerChatStream(_lost(markup))
    gui = await _one_turn(await _service(api_factory, tmp_path, lossy), gui_factory)
    assert await gui.page.evaluate(NOTES) == [{"body": REPLY, "notes": [_warning(markup)]}]
    assert await gui.page.evaluate("() => window.pwned === undefined")


class LossyReattach(ChatStreamWrites):
    """The real service, its re-attaches (`GET .../chat/stream`) read as through another
    instance that lost frames: after the first frame, a `frames_lost` status frame; and the
    `done` frame held until `release` is set (`holding` is set when it waits), so a test
    acts between the reply being stored and the page being told. With `drop`, the turn's
    own stream (the POST) is cut after its first frame: the page re-attaches by itself.
    Pass `plugins()` to `api_factory`."""

    def __init__(self, *, drop: bool = False) -> None:
        self.drop = drop
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    def rewrite(self, request: web.Request, write: Write) -> Write | None:
        if request.method == "POST" and self.drop:

            async def cut_write(data: bytes | bytearray | memoryview) -> None:
                await write(data)
                if is_frame(data) and request.transport is not None:
                    request.transport.close()  # a network drop mid-turn

            return cut_write
        if request.method != "GET":
            return None
        lossy_write = after_first_frame(write, sse_events(_lost()))

        async def held_done_write(data: bytes | bytearray | memoryview) -> None:
            if b'"type":"done"' in bytes(data):
                self.holding.set()
                await self.release.wait()
            await lossy_write(data)

        return held_done_write


async def _stored_reply(feed: EventsFeed, session_id: str) -> None:
    """Until the service has stored the turn's reply (its `done` frame is held): the turn
    announces its session `updated` once both messages are written, before its `done`
    frame (a chat's `created` came when the turn opened it). The feed must be open before the turn
    stores: a stream without Last-Event-ID starts at "now", so an event already announced
    when it opens never reaches it."""
    await feed.wait_for(
        lambda frame: (
            frame.get("type") == "session"
            and frame["session_id"] == session_id
            and frame["change"] == SessionChange.UPDATED
        )
    )


@pytest.mark.parametrize("reattach", ["after a reload", "after a dropped connection"])
async def test_the_warning_moves_onto_the_stored_reply_after_a_reattach(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, reattach: str
) -> None:
    """Re-attached (the page reloaded, or its stream cut), the turn's frames lost: the chat
    opened again once the reply is stored (the history brings it) and before the stream
    ends. The streamed reply goes (the stored one is the same), and its warning goes under
    the stored one: one reply, one warning, the operator's message once."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply(REPLY)], gate=gate)
    lossy = LossyReattach(drop=reattach == "after a dropped connection")
    api = await _service(api_factory, tmp_path, lossy, runtime)
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("is the build green?")
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)
    if not lossy.drop:
        await page.reload()  # the page re-attaches to the running turn
    await page.wait_for_selector("#messages .msg.assistant .lost-note")  # lost on the way
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    session_id = sessions[0]["id"]

    feed = await EventsFeed.open(api)  # before the turn stores its reply
    try:
        gate.set()
        await asyncio.wait_for(lossy.holding.wait(), PATIENCE_SECONDS)
        await _stored_reply(feed, session_id)
    finally:
        await feed.close()
    await page.click(f"[data-session='{session_id}'] .session-open")  # the history again
    await page.wait_for_selector(f"#messages .msg.assistant[data-id$='-a'] .body >> text={REPLY}")
    lossy.release.set()
    await gui.wait_done()

    assert await gui.page.evaluate(NOTES) == [{"body": REPLY, "notes": [_warning(LOST_TEXT)]}]
    session = await (await api.get(f"/api/operator/chat/session/{session_id}")).json()
    answer = next(m for m in session["messages"] if m["role"] == "assistant")
    assert await page.locator("#messages .msg.assistant").get_attribute("data-id") == answer["id"]
    assert await page.locator("#messages .msg.user").count() == 1
    # The sign-in page's own 401 (no session yet), and the stream this test cut, if it did.
    cut = "ERR_INCOMPLETE_CHUNKED_ENCODING"
    errors = [e for e in gui.console_errors if "401" not in e and not (lossy.drop and cut in e)]
    assert errors == []
