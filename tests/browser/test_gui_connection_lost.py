"""A lost connection to the service shows: while the live events stream cannot get back (the
service stopped, the network went), a line under the header says so and that the page is
reconnecting, and it goes once the stream is back (docs/gui.md "Live updates"). A stream
that comes back at its first try says nothing."""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest

from bot.runtimes.base import Delta
from tests.browser.conftest import WAIT_MS, GuiFactory
from tests.conftest import make_settings
from tests.fakes.runtimes import ScriptedRuntime

# An events stream that opens and ends at once, asking to be re-tried in 100 ms: the browser
# reconnects by itself (with Last-Event-ID), as after a dropped connection.
DROPPED = "retry: 100\n\n"


async def test_a_lost_events_stream_says_so_until_it_is_back(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    state = {"mode": "drop"}
    answered: list[str] = []

    async def events(route: Any) -> None:
        answered.append(state["mode"])
        if state["mode"] == "drop":
            state["mode"] = "away"  # dropped once, then the service does not answer
            await route.fulfill(
                status=200, headers={"Content-Type": "text/event-stream"}, body=DROPPED
            )
        elif state["mode"] == "away":
            await route.abort("connectionrefused")
        else:
            await route.continue_()

    await page.route("**/api/operator/events*", events)
    await gui.sign_in()
    banner = page.locator("#connection")
    await banner.wait_for(state="visible")
    text = await banner.inner_text()
    assert "connection to the service was lost" in text.lower()
    assert "reconnecting" in text.lower()
    assert await banner.get_attribute("role") == "status"

    state["mode"] = "back"
    await banner.wait_for(state="hidden")
    await page.wait_for_selector("body[data-live=stream]")
    assert answered[:2] == ["drop", "away"] and answered[-1] == "back"


# What nginx answers for a stopped upstream: a page of its own, not the service's error JSON.
PROXY_PAGE = (
    "<html><head><title>{status}</title></head><body><center><h1>{status}</h1></center>"
    "<hr><center>nginx</center></body></html>"
)


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_a_proxys_gateway_error_for_a_stopped_service_says_the_connection_is_lost(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, status: int
) -> None:
    """Behind a proxy a stopped service is no network break: the proxy answers 502, 503 or
    504 with a page of its own. Not the service's JSON, so the service cannot be reached,
    and the page says so (the service's own 503, Redis away, says nothing of it:
    tests/browser/test_gui_events_redis_failure.py)."""
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    state = {"mode": "drop"}

    async def events(route: Any) -> None:
        if state["mode"] == "drop":
            state["mode"] = "proxy"  # dropped once, then only the proxy answers
            await route.fulfill(
                status=200, headers={"Content-Type": "text/event-stream"}, body=DROPPED
            )
        elif state["mode"] == "proxy":
            page_text = PROXY_PAGE.format(status=f"{status} {HTTPStatus(status).phrase}")
            await route.fulfill(status=status, content_type="text/html", body=page_text)
        else:
            await route.continue_()

    await page.route("**/api/operator/events*", events)
    await gui.sign_in()
    banner = page.locator("#connection")
    await banner.wait_for(state="visible")
    assert "connection to the service was lost" in (await banner.inner_text()).lower()

    state["mode"] = "back"
    await banner.wait_for(state="hidden")
    await page.wait_for_selector("body[data-live=stream]")


async def test_a_stream_back_at_its_first_try_says_nothing(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    opened: list[int] = []
    await page.expose_function("sawConnectionLine", lambda: opened.append(1))
    await page.add_init_script(
        """new MutationObserver(() => {
             const el = document.querySelector('#connection');
             if (el && el.textContent) window.sawConnectionLine();
           }).observe(document, {subtree: true, attributes: true, childList: true});"""
    )
    drops = {"left": 1}
    back = asyncio.Event()

    async def events(route: Any) -> None:
        if drops["left"]:
            drops["left"] -= 1
            await route.fulfill(
                status=200, headers={"Content-Type": "text/event-stream"}, body=DROPPED
            )
        else:
            await route.continue_()
            back.set()

    await page.route("**/api/operator/events*", events)
    await gui.sign_in()
    await asyncio.wait_for(back.wait(), WAIT_MS / 1000)  # reconnected at its first try
    await page.wait_for_selector("body[data-live=stream]")
    assert opened == []  # the observer saw every change since the page loaded


@pytest.mark.parametrize("sent_early", [False, True], ids=["chat-open", "sent-while-loading"])
async def test_a_reply_lost_with_the_connection_shows_once_the_service_is_back(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, sent_early: bool
) -> None:
    """The turn's stream was cut and every re-attach failed (the page says the connection
    was lost), while the service finished the turn. Once the service can be reached again
    (the live stream is back) the page opens the chat again by itself and shows the reply
    that was stored meanwhile: the operator is not left with "Reopen the chat" to do. So too
    for a message sent before the page had its chat open (sign-in still loading it)."""
    runtime = ScriptedRuntime([[Delta("the answer that was waiting")]])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    session = await (await api.post("/api/operator/chat/new", json={})).json()
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    state = {"down": True}
    first_events = {"left": 1}

    async def events(route: Any) -> None:
        if first_events["left"]:
            first_events["left"] -= 1  # opened, then dropped: the service goes away
            await route.fulfill(
                status=200, headers={"Content-Type": "text/event-stream"}, body=DROPPED
            )
        elif state["down"]:
            await route.abort("connectionrefused")
        else:
            await route.continue_()

    cut = 'id: 1\ndata: {"type": "delta", "text": "half an ans"}\n\n'

    async def chat_stream(route: Any) -> None:
        if route.request.method == "POST":  # the turn's stream, cut after one frame
            headers = {
                "Content-Type": "text/event-stream",
                "X-Steelframe-Session": session["id"],
                "X-Steelframe-Turn": "lost-turn",
            }
            await route.fulfill(status=200, headers=headers, body=cut)
        else:
            await route.abort("connectionrefused")  # every re-attach, while it is away

    await page.route("**/api/operator/events*", events)
    await page.route("**/api/operator/chat/stream*", chat_stream)
    sent = asyncio.Event()

    async def open_late(route: Any) -> None:
        await sent.wait()  # sign-in's opening of the chat answers after the send
        await route.continue_()

    if sent_early:
        await page.route("**/api/operator/chat/session/*/open", open_late)
    else:
        sent.set()
    await gui.sign_in()
    if not sent_early:
        await page.wait_for_selector(
            f"#session-list .session.current[data-session='{session['id']}']"
        )
    await gui.send("a question")
    sent.set()
    # The service ran the turn all the same (here: asked directly, in the same chat).
    answered = await api.post(
        "/api/operator/chat", json={"message": "a question", "session": session["id"]}
    )
    assert answered.status == 200
    await page.locator("#messages .msg.assistant.stopped").wait_for(timeout=60_000)
    assert await page.inner_text("#status-line") == "connection lost"

    state["down"] = False  # the service can be reached again
    await page.unroute("**/api/operator/chat/stream*")
    reply = page.locator("#messages .msg.assistant", has_text="the answer that was waiting")
    await reply.wait_for()
    assert await page.locator("#messages .msg.assistant.stopped").count() == 0
    assert await page.locator("#messages .msg.user", has_text="a question").count() == 1
