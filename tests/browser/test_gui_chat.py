"""The Chat surface in Chromium: stop, reopen, focus, agent switch, delete, sign-out, CSRF,
and a 1,000-message session opened with paged history."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.clock import utcnow
from bot.models import ChatSession, ChatTurn
from bot.runtimes.base import Delta, Thinking
from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.conftest import ApiClient, make_settings
from tests.fakes.runtimes import ScriptedRuntime


async def session_json(api: ApiClient, sid: str) -> dict[str, Any]:
    response = await api.get(f"/api/operator/chat/session/{sid}")
    assert response.status == 200
    data: dict[str, Any] = await response.json()
    return data


async def current_session(api: ApiClient) -> str:
    """The newest chat, once there is one: the page clears its composer before its POST is
    sent, so right after `send` the service may not have the chat yet (a loaded machine)."""
    deadline = asyncio.get_running_loop().time() + WAIT_MS / 1000
    while True:
        sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
        if sessions:
            return str(sessions[0]["id"])
        assert asyncio.get_running_loop().time() < deadline, "no chat was made"
        await asyncio.sleep(0.05)


async def test_stop_stops_the_turn_on_the_server(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Thinking("pondering"), Delta("never shown")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    await gui.send("a long question")
    await gui.page.wait_for_selector("#stop:not([hidden])")
    await gui.page.keyboard.press("Escape")  # Esc stops, as the Stop button does
    stopped = gui.page.locator("#messages .msg.assistant.stopped")
    await stopped.wait_for()
    assert "Stopped. Nothing of this turn was kept" in await stopped.inner_text()
    await gui.wait_done()
    # The model call was cancelled, or the stop landed before it started.
    assert runtime.cancelled.is_set() or not runtime.requests
    assert await gui.page.inner_text("#status-line") == "stopped"
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert all((s["turns"] or 0) == 0 for s in sessions)


async def test_stop_pressed_before_the_server_has_the_turn_still_stops_it(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("never shown")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    clicked = asyncio.Event()

    async def hold_until_stop_clicked(route: Any) -> None:
        await clicked.wait()
        await route.continue_()

    await gui.page.route("**/api/operator/chat/stream", hold_until_stop_clicked)
    await gui.send("stop me at once")
    await gui.page.click("#stop")
    assert await gui.page.inner_text("#status-line") == "stopping…"
    # Every status line from here on (the turn's first frame, `turn started`, comes next).
    await gui.page.evaluate(
        """() => {
          window.__statuses = [];
          new MutationObserver(() => window.__statuses.push(
            document.querySelector('#status-line').textContent,
          )).observe(document.querySelector('#status-line'),
                     {childList: true, characterData: true, subtree: true});
        }"""
    )
    clicked.set()
    await gui.page.locator("#messages .msg.assistant.stopped").wait_for()
    await gui.wait_done()
    assert runtime.cancelled.is_set() or not runtime.requests
    statuses = await gui.page.evaluate("window.__statuses")
    assert statuses and statuses[-1] == "stopped", statuses
    assert set(statuses[:-1]) <= {"stopping…"}, statuses  # no phase of the turn meanwhile


async def test_reopen_brings_back_thinking_and_the_reply(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    await gui.send("first question")
    await gui.wait_done()
    first = await current_session(api)
    await gui.page.keyboard.press("Control+k")  # new chat
    await gui.page.wait_for_function(
        "() => document.querySelectorAll('#messages .msg').length == 0"
    )
    await new_chat_listed(gui, before=first)
    await gui.page.click(f"[data-session='{first}'] .session-open")
    reply = gui.page.locator("#messages .msg.assistant").first
    await reply.wait_for()
    assert "No model is configured" in await reply.inner_text()
    thinking = reply.locator("details.thinking")
    assert await thinking.is_visible()
    await thinking.locator("summary").click()
    assert "Looking at 0 retrieved hit(s)" in await thinking.locator(".thinking-body").inner_text()
    assert await gui.page.inner_text("#chat-title") == "first question"


async def new_chat_listed(gui: Gui, *, before: str) -> None:
    """Until the sidebar has reloaded with the new chat as the current one: a click on the
    list before that can land after it moved under the pointer, on the new (empty) chat."""
    await gui.page.wait_for_function(
        """(before) => {
          const current = document.querySelector("[data-session].current");
          return current !== null && current.dataset.session !== before;
        }""",
        arg=before,
    )


async def draft(gui: Gui, issue: int) -> None:
    if await gui.page.is_hidden("#focus-form"):
        await gui.page.click("#focus-clear")
    await gui.page.fill("#focus-input", str(issue))
    await gui.page.click("#focus-form button")
    assert await gui.page.inner_text("#focus-text") == f"focus: #{issue}"
    await gui.send("draft a decision: Ship it.")
    await gui.wait_done()
    await gui.page.wait_for_selector("#publish-bar:not([hidden])")


async def test_focus_clear_and_agent_switch_clear_the_decision_draft(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    settings = make_settings(tmp_path, agents_json={"ops": {"repo": "steelframe-dev/ops"}})
    api = await api_factory(settings, runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    await draft(gui, 7)
    sid = await current_session(api)
    await gui.page.click("#focus-clear")
    assert await gui.page.is_hidden("#publish-bar")
    assert await gui.page.is_visible("#focus-form")
    await gui.send("never mind")
    await gui.wait_done()
    after = await session_json(api, sid)
    assert after["focus"] is None and after["decision"] is None
    assert await gui.page.is_hidden("#publish-bar")

    await draft(gui, 8)
    await gui.page.select_option("#agent-select", "ops")
    assert await gui.page.is_hidden("#publish-bar")
    await gui.send("now as ops")
    await gui.wait_done()
    after = await session_json(api, sid)
    assert after["agent"] == "ops" and after["decision"] is None
    assert await gui.page.input_value("#agent-select") == "ops"

    await draft(gui, 9)
    await gui.page.click("#new-chat")  # a new chat starts without the draft...
    await gui.page.wait_for_selector("#publish-bar", state="hidden")
    await new_chat_listed(gui, before=sid)
    # ...and the chat left keeps none either (docs/gui.md: a new chat clears it). Reopening
    # it shows its history, not a replay of its last turn bringing the draft back.
    await gui.page.click(f"[data-session='{sid}'] .session-open")
    await gui.page.wait_for_selector(f"[data-session='{sid}'].current")
    await gui.page.wait_for_function(
        "() => document.querySelectorAll('#messages .msg.assistant').length == 5"
    )
    assert await gui.page.is_hidden("#publish-bar")
    assert await gui.page.is_visible("#send")
    assert (await session_json(api, sid))["decision"] is None


async def test_delete_sign_out_and_csrf_refusal(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    await gui.send("to be deleted")
    await gui.wait_done()
    sid = await current_session(api)
    await gui.page.click(f"[data-session='{sid}'] .session-delete")
    await gui.page.wait_for_selector(f"[data-session='{sid}']", state="detached")
    assert gui.dialogs and gui.dialogs[0].startswith("confirm:")
    assert (await api.get(f"/api/operator/chat/session/{sid}")).status == 404

    # A request without the CSRF header is refused even with the session cookie.
    status = await gui.page.evaluate(
        "async () => (await fetch('/api/operator/chat/new', {method: 'POST',"
        " headers: {'Content-Type': 'application/json'}, body: '{}'})).status"
    )
    assert status == 403
    assert (await (await api.get("/api/operator/chat/sessions")).json())["sessions"] == []

    await gui.page.click("#sign-out")
    await gui.page.wait_for_selector("#signin:not([hidden])")
    assert await gui.page.evaluate("async () => (await fetch('/gui/session')).status") == 401
    await gui.page.reload()
    await gui.page.wait_for_selector("#signin:not([hidden])", timeout=WAIT_MS)


# Counts the sessions lists the page has read (`window.sessionsRead`): bumped as a list's
# JSON resolves, before the code awaiting it goes on, so once a test sees the count, the page
# has finished with that answer.
COUNT_SESSIONS_READ = """
window.sessionsRead = 0;
const pageFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await pageFetch(...args);
  if (String(args[0]).endsWith("/api/operator/chat/sessions")) {
    const json = response.json.bind(response);
    response.json = () => json().then((data) => { window.sessionsRead += 1; return data; });
  }
  return response;
};
"""


async def test_a_list_asked_before_a_delete_and_answered_after_it_is_not_shown(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """Sidebar loads overlap (a `session` event's, the delete's own) and may be answered out
    of order: the list read before the delete, arriving last, must not bring the deleted
    chat back."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api, sign_in=False)
    await gui.page.add_init_script(COUNT_SESSIONS_READ)
    await gui.sign_in()
    await gui.send("deleted while a list is on its way")
    await gui.wait_done()
    sid = await current_session(api)
    row = f"[data-session='{sid}']"
    await gui.page.wait_for_selector(row)
    chat = api.services.db.call(lambda s: s.get(ChatSession, sid))
    assert chat is not None

    stale_read = asyncio.Event()
    release = asyncio.Event()
    held: list[Any] = []

    async def hold_the_first_list(route: Any) -> None:
        if held:
            await route.continue_()
            return
        held.append(route.request)
        answer = await route.fetch()  # read now: the list still has the chat
        stale_read.set()
        await release.wait()
        await route.fulfill(response=answer)

    await gui.page.route("**/api/operator/chat/sessions", hold_the_first_list)
    # A session event makes the page load the list: that answer is held.
    await api.services.chat_sessions.session_updated(chat.operator_id, sid)
    await stale_read.wait()
    await gui.page.click(f"{row} .session-delete")
    await gui.page.wait_for_selector(row, state="detached")  # the delete's own, newer list

    read = await gui.page.evaluate("() => window.sessionsRead")
    release.set()
    await gui.page.wait_for_function(f"() => window.sessionsRead > {read}")  # the held one
    assert await gui.page.locator(row).count() == 0


async def test_a_thousand_message_session_opens_paged(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    session = await (await api.post("/api/operator/chat/new", json={"title": "long"})).json()
    # Another chat is the active one, so the sign-in opens that and the click below is the
    # only load of the long chat (a sign-in's load of it painted first, then the click's
    # repainted it to its last page under the test's "older" click).
    await api.post("/api/operator/chat/new", json={"title": "other"})

    def seed(db: Any) -> None:
        now = utcnow()
        for seq in range(1000):
            role = "user" if seq % 2 == 0 else "assistant"
            db.add(
                ChatTurn(
                    id=f"seed-{seq}",
                    session_id=session["id"],
                    seq=seq,
                    role=role,
                    content=f"message {seq} with **some** markdown",
                    meta={},
                    created_at=now,
                )
            )

    api.services.db.call(seed)
    gui = await gui_factory(api)
    await gui.page.click(f"[data-session='{session['id']}'] .session-open")
    await gui.page.wait_for_selector("#messages [data-id='seed-999']")
    assert await gui.page.locator("#messages .msg").count() == 100
    older = gui.page.locator("#messages button.older")
    assert await older.inner_text() == "Show earlier messages (900)"
    await older.click()
    await gui.page.wait_for_selector("#messages [data-id='seed-800']")
    assert await gui.page.locator("#messages .msg").count() == 200
    # Still responsive: a scroll and a keystroke land at once after painting.
    await gui.page.locator("#messages").evaluate("el => el.scrollTop = 0")
    await gui.page.fill("#message", "still typing")
    assert await gui.page.input_value("#message") == "still typing"


async def test_a_turn_survives_a_reload_and_a_session_switch(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Thinking("weighing it"), Delta("the answer, once")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    other = await (await api.post("/api/operator/chat/new", json={"title": "other"})).json()
    await (await api.post("/api/operator/chat/new", json={})).json()
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("held question")
    # The server holds the turn (the page shows "starting…" before its request has left).
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)
    await page.reload()  # the page re-attaches to the running turn
    await page.wait_for_selector("#stop:not([hidden])")
    await page.click(f"[data-session='{other['id']}'] .session-open")  # look elsewhere
    await page.wait_for_function(
        "() => document.querySelector('#chat-title').textContent == 'other'"
    )
    # The chat shown is not the one whose reply streams: nothing here is held back.
    assert await page.get_attribute("#messages", "aria-busy") is None
    gate.set()
    toast = page.locator("#toasts .toast", has_text="The reply you were waiting for is ready")
    await toast.wait_for()
    assert await page.inner_text("#chat-title") == "other"
    assert await page.locator("#messages .msg").count() == 0  # nothing leaked in here
    await toast.locator("button", has_text="Open chat").click()
    answer = page.locator("#messages .msg.assistant", has_text="the answer, once")
    await answer.wait_for()
    assert await answer.count() == 1
    assert await page.locator("#messages .msg.user", has_text="held question").count() == 1


async def test_a_message_sent_while_the_sessions_load_keeps_its_reply(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The composer works as soon as the app shows; the sign-in's first render of the
    stored chats, landing after the reply, must not wipe it."""
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    held = asyncio.Event()
    asked: list[str] = []

    async def hold_sessions(route: Any) -> None:
        asked.append(route.request.url)
        if len(asked) > 1:  # later lists (the live stream's reload on opening) come as asked
            await route.continue_()
            return
        answer = await route.fetch()  # the sign-in's: read now (no chats yet), delivered late
        await held.wait()
        await route.fulfill(response=answer)

    await page.route("**/api/operator/chat/sessions", hold_sessions)
    await gui.sign_in()
    await gui.send("what runs on Mondays?")
    await gui.wait_done()
    held.set()
    await page.wait_for_selector("body[data-screen=chat]")  # sign-in's render has run
    await page.wait_for_selector("#session-list .session")
    assert await page.locator("#messages .msg.user").count() == 1
    reply = page.locator("#messages .msg.assistant", has_text="No model is configured")
    assert await reply.count() == 1


async def test_a_new_chat_started_while_the_app_loads_stays_open(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """Ctrl+K works as soon as the app shows; the sign-in's opening of the chat that was
    active before (once the Board, loaded alongside, is in) must not take the operator back
    there: their next message would go to that chat."""
    api = await api_factory(make_settings(tmp_path))
    assert (await api.post("/api/operator/chat/new", json={"title": "old chat"})).status == 201
    assert (
        await api.post("/api/operator/chat", json={"message": "earlier question"})
    ).status == 200
    old = await current_session(api)
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    held = asyncio.Event()

    async def hold_board(route: Any) -> None:
        await held.wait()  # the sign-in's Board comes late (later ones too: nothing else asks)
        await route.continue_()

    await page.route("**/api/operator/board?*", hold_board)
    await gui.sign_in()
    await page.keyboard.press("Control+k")
    await page.locator("#messages #chat-empty").wait_for()
    held.set()
    await page.wait_for_selector("body[data-live=stream]")  # sign-in's render has run
    assert await page.inner_text("#chat-title") == "New chat"
    assert await page.locator("#messages .msg").count() == 0
    await gui.send("a new question")
    await gui.wait_done()
    old_turns = (await session_json(api, old))["messages"]
    assert [m["content"] for m in old_turns if m["role"] == "user"] == ["earlier question"]
    assert await current_session(api) != old


async def test_a_message_the_service_refuses_is_kept_without_a_useless_retry(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """A 4xx (here the real 400 of a message over 32,000 characters) will be refused again as
    sent: the notification says why and offers no Retry; the message is back in the box and
    the empty chat still says what to do. Offline, Retry is offered (it can work once back
    online)."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await page.locator("#messages #chat-empty").wait_for()
    big = "x " * 40_000
    await page.fill("#message", big)
    await page.press("#message", "Enter")
    refused = page.locator("#toasts .toast.error", has_text="Not sent")
    await refused.wait_for()
    assert "longer than 32000 characters" in await refused.inner_text()
    assert await refused.locator("button", has_text="Retry").count() == 0
    assert await page.input_value("#message") == big
    await page.locator("#messages #chat-empty").wait_for()
    assert await page.locator("#messages .msg").count() == 0
    await refused.locator("button[aria-label='Dismiss notification']").click()

    await page.context.set_offline(True)
    await page.fill("#message", "sent while offline")
    await page.press("#message", "Enter")
    offline = page.locator("#toasts .toast.error", has_text="Not sent")
    await offline.wait_for()
    assert await page.inner_text("#status-line") == "offline: not sent"
    await page.context.set_offline(False)
    await offline.locator("button", has_text="Retry").click()
    await gui.wait_done()
    await page.locator("#messages .msg.user", has_text="sent while offline").wait_for()
    assert await page.locator("#messages #chat-empty").count() == 0


async def test_the_next_operator_signing_in_on_the_page_starts_clean(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """Sign out, and another operator signs in on the same page (a shared machine): nothing
    of the last one's chat shows (its title, focus, notifications), and their first message
    is not sent into the last one's session (which the server refuses: theirs only)."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await page.fill("#focus-input", "0")  # a notification while alice is signed in
    await page.click("#focus-form button")
    await page.locator("#toasts .toast").wait_for()
    await page.fill("#focus-input", "7")
    await page.click("#focus-form button")
    await gui.send("alice's private question")
    await gui.wait_done()
    await page.click("#sign-out")
    await page.wait_for_selector("#signin:not([hidden])")

    bob = api.new_operator("bob")
    await page.fill("#token", bob.token)  # on this page, as it is: no reload between
    await page.press("#token", "Enter")
    await page.wait_for_selector("#app:not([hidden])")
    await page.locator("#session-list", has_text="No sessions yet").wait_for()  # bob's list
    assert await page.inner_text("#chat-title") == "New chat"
    assert await page.is_hidden("#focus-chip")
    assert await page.locator("#toasts .toast").count() == 0
    assert "alice" not in await page.inner_text("#app")
    await gui.send("bob's question")
    await gui.wait_done()
    await page.locator("#messages .msg.assistant", has_text="No model is configured").wait_for()
    assert await page.locator("#toasts .toast.error").count() == 0
    listed = (await (await bob.get("/api/operator/chat/sessions")).json())["sessions"]
    assert [s["title"] for s in listed] == ["bob's question"]


async def test_a_turn_whose_connection_is_lost_for_good_says_so(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The stream ends without `done` and every re-attach fails (the service is gone): the
    status line says it is reconnecting while it tries, then that the connection was lost,
    not the phase the turn was in when it was last heard of."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    frames = [
        {"type": "status", "text": "retrieve 1/3 · 2 hits", "session": "s1", "turn_id": "t1"},
        {"type": "delta", "text": "half an answer"},
    ]
    cut = "".join(f"id: {n}\ndata: {json.dumps(f)}\n\n" for n, f in enumerate(frames, 1))
    seen: list[str] = []
    busy: list[str | None] = []

    async def cut_then_gone(route: Any) -> None:
        if route.request.method == "POST":  # the turn's stream, cut after two frames
            headers = {"Content-Type": "text/event-stream", "X-Steelframe-Turn": "t1"}
            await route.fulfill(status=200, headers=headers, body=cut)
            return
        seen.append(await page.inner_text("#status-line"))  # as the page re-attaches
        busy.append(await page.get_attribute("#messages", "aria-busy"))
        await route.abort("connectionrefused")

    await page.route("**/api/operator/chat/stream*", cut_then_gone)
    await gui.send("a question")
    await page.locator("#messages .msg.assistant.stopped").wait_for(timeout=60_000)
    await gui.wait_done()
    assert "The connection to the service was lost" in await page.inner_text("#messages")
    assert seen and all(s.startswith("connection lost: reconnecting") for s in seen), seen
    assert await page.inner_text("#status-line") == "connection lost"
    # Busy while it tried (the reply may go on), then the lost reply is announced whole.
    assert busy and all(b == "true" for b in busy), busy
    assert await page.get_attribute("#messages", "aria-busy") is None


async def test_a_first_chat_is_listed_while_its_first_turn_runs(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The sidebar said "No sessions yet" for as long as the first turn of a new chat ran: an
    untitled chat with no turn yet is listed only when it is the open one, and the page had
    not taken the turn's chat as its open one until the turn ended."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("an answer")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    await gui.send("a slow first question")
    sid = await current_session(api)  # written before the model is asked
    listed = gui.page.locator(f'#session-list .session[data-session="{sid}"]')
    await listed.wait_for(timeout=WAIT_MS)
    assert "No sessions yet" not in await gui.page.inner_text("#session-list")
    gate.set()
    await gui.wait_done()
