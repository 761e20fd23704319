"""The Chat and Board at a phone's size and a laptop's: nothing wider than the window, the
controls on screen and never covered (by a notification either), the conversation followed
to its newest reply, a quiet reload, and a run modal that opens on a safe control."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.clock import utcnow
from bot.lifecycle.models import Task
from bot.models import ChatTurn
from bot.runtimes.base import Delta
from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.conftest import ApiClient, make_settings
from tests.fakes.runtimes import ScriptedRuntime

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}

# Visible, inside the window, and the control itself is what a click at its centre hits.
CLICKABLE = """(sel) => {
  const el = document.querySelector(sel);
  if (!el || el.hidden) return sel + ' hidden';
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight)
    return sel + ' off screen ' + JSON.stringify(r);
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  if (hit && (hit === el || el.contains(hit))) return 'ok';
  return sel + ' covered by ' + (hit?.outerHTML ?? 'nothing').slice(0, 120);
}"""
TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
OVERFLOW = "() => document.documentElement.scrollWidth - innerWidth"
# The newest reply's end is inside the scrolled conversation (what the operator sees).
NEWEST_IN_VIEW = """() => {
  const box = document.querySelector('#messages').getBoundingClientRect();
  const replies = document.querySelectorAll('#messages .msg.assistant');
  const r = replies[replies.length - 1].getBoundingClientRect();
  return r.bottom <= box.bottom + 2 && r.bottom >= box.top;
}"""


# Scrolls the chat to its top and says whether "Jump to latest" shows once the scroll's
# handlers have run (ours is added last, so it runs after the page's own).
SCROLLED_TO_TOP_OFFERS_LATEST = """el => new Promise(resolve => {
  el.addEventListener("scroll", () => resolve(!document.querySelector("#jump-latest").hidden),
                      {once: true});
  el.scrollTop = 0;
})"""


async def clickable(gui: Gui, selector: str) -> None:
    assert await gui.page.evaluate(CLICKABLE, selector) == "ok"


async def no_overflow(gui: Gui, where: str) -> None:
    assert await gui.page.evaluate(OVERFLOW) <= 0, where


def seed_long_session(api: ApiClient, sid: str, turns: int) -> None:
    def seed(db: Any) -> None:
        now = utcnow()
        for seq in range(turns * 2):
            role = "user" if seq % 2 == 0 else "assistant"
            text = f"question {seq}" if role == "user" else f"answer {seq}\n\n" + "words " * 60
            db.add(
                ChatTurn(
                    id=f"seed-{seq}",
                    session_id=sid,
                    seq=seq,
                    role=role,
                    content=text,
                    meta={},
                    created_at=now,
                )
            )

    api.services.db.call(seed)


def seed_task(api: ApiClient, *, issue: int, title: str = "A running task") -> None:
    def seed(db: Any) -> None:
        now = utcnow()
        db.add(
            Task(
                repo="steelframe-dev/demo",
                issue=issue,
                title=title,
                state="running",
                created_at=now,
                updated_at=now,
            )
        )

    api.services.db.call(seed)


async def open_session(gui: Gui, sid: str) -> None:
    """Through the drawer on a phone, the sidebar on a laptop."""
    if await gui.page.is_visible("#menu-toggle"):
        await gui.page.click("#menu-toggle")
        assert await gui.page.get_attribute("#menu-toggle", "aria-expanded") == "true"
    await gui.page.click(f"[data-session='{sid}'] .session-open")
    await gui.page.wait_for_selector(f"#messages [data-id='seed-{1}']", state="attached")


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390x844", "1280x800"])
async def test_controls_fit_and_the_chat_follows_the_newest_reply(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, viewport: dict[str, int]
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    session = await (await api.post("/api/operator/chat/new", json={"title": "long"})).json()
    seed_long_session(api, session["id"], 40)
    gui = await gui_factory(api, viewport=viewport)
    page = gui.page
    await open_session(gui, session["id"])
    await page.wait_for_selector("#sidebar", state="visible" if viewport is LAPTOP else "hidden")
    await no_overflow(gui, "a 40-turn chat")
    assert await page.evaluate(NEWEST_IN_VIEW)

    await page.fill("#focus-input", "0")  # a notification (an error) appears...
    await page.click("#focus-form button")
    await page.locator("#toasts .toast.error").wait_for()
    await page.fill("#focus-input", "7")
    await page.click("#focus-form button")
    released = asyncio.Event()

    async def hold_turn(route: Any) -> None:
        await released.wait()
        await route.continue_()

    await page.route("**/api/operator/chat/stream", hold_turn)
    await gui.send("draft a decision: Ship it.")
    await page.wait_for_selector("#stop:not([hidden])")
    await clickable(gui, "#stop")  # ...and covers no control
    await no_overflow(gui, "a turn running, a notification shown")
    released.set()
    await gui.wait_done()
    await page.wait_for_selector("#publish-bar:not([hidden])")
    await page.wait_for_function(NEWEST_IN_VIEW)
    assert (
        "Decision draft for #7" in await page.locator("#messages .msg.assistant").last.inner_text()
    )
    for control in ["#send", "#publish", "#message"]:
        await clickable(gui, control)
    await no_overflow(gui, "the Publish bar shown")

    # Scrolled up to read, the reader stays put and is offered the way back at once (the
    # scroll's own handler shows it, not the next change of the chat).
    offered = await page.locator("#messages").evaluate(SCROLLED_TO_TOP_OFFERS_LATEST)
    assert offered, "scrolled up, Jump to latest was not offered"
    await page.click("#jump-latest")
    await page.wait_for_function(NEWEST_IN_VIEW)

    await gui.screen("board")
    await no_overflow(gui, "the Board")
    await clickable(gui, "#tab-chat")
    # The extremes and the sidebar's edge: the same holds from 360 to 2560 px.
    await gui.screen("chat")
    for width in (360, 800, 2560):
        await page.set_viewport_size({"width": width, "height": 800})
        await no_overflow(gui, f"{width} px")
        for control in ["#send", "#publish", "#tab-board"]:
            await clickable(gui, control)


async def test_reload_mid_turn_keeps_the_question_and_shows_one_reply(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("see #5 for the answer")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("held question")
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)
    await page.reload()
    await page.wait_for_selector("#stop:not([hidden])")
    asked = page.locator("#messages .msg.user", has_text="held question")
    await asked.wait_for()
    assert await page.locator("#chat-empty").count() == 0
    gate.set()
    await gui.wait_done()
    await page.locator("#messages .msg.assistant", has_text="see #5").wait_for()
    assert await page.locator("#messages .msg.assistant").count() == 1
    assert await asked.count() == 1

    # Loading the page again: the finished turn is history, not replayed, and nothing 404s.
    gui.failed_requests.clear()
    await page.reload()
    await page.locator("#messages .msg.assistant", has_text="see #5").wait_for()
    await page.wait_for_selector("#session-list .session.current")
    assert await page.locator("#messages .msg.assistant").count() == 1
    assert await page.locator("#messages .msg.user").count() == 1
    assert await page.is_visible("#send") and await page.is_hidden("#stop")
    assert await page.inner_text("#status-line") == ""  # the turn's "done" is not this page's
    # (The events stream the reload cut off is no failed answer.)
    assert [r for r in gui.failed_requests if "ERR_ABORTED" not in r] == []
    assert not [e for e in gui.console_errors if "404" in e]


async def test_live_and_stored_replies_have_the_same_links(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    runtime = ScriptedRuntime([[Delta("")]])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    seed_task(api, issue=7)
    cited = await (await api.post("/api/operator/chat/new", json={"title": "cited"})).json()
    # The reply streams in pieces, the session id whole in the last one before `done`.
    runtime.drafts = [[Delta("as said in "), Delta(f"{cited['id']}, see #7.")]]
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    # Sign-in opens the active chat while the composer is already live. On a loaded machine
    # the operator may send while that chat is loading, and the chat may arrive before the
    # turn's first answer: held here in that order, every time. The chat arriving late must
    # not repaint the conversation over the live turn.
    opening, loaded, answered = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hold_open(route: Any) -> None:
        opening.set()
        await loaded.wait()
        await route.continue_()

    async def hold_answer(route: Any) -> None:
        await answered.wait()
        await route.continue_()

    await page.route("**/api/operator/chat/session/*/open", hold_open)
    await page.route("**/api/operator/chat/stream", hold_answer)
    await gui.sign_in()
    await asyncio.wait_for(opening.wait(), WAIT_MS / 1000)
    await gui.send("what was said?")
    async with page.expect_response(lambda r: r.url.endswith("/open")) as opened:
        loaded.set()
    await (await opened.value).finished()
    await page.evaluate(TWO_FRAMES)  # the page has painted what it made of the chat
    answered.set()
    await gui.wait_done()
    links = (
        "() => [...document.querySelectorAll('#messages .msg.assistant .cite')]"
        ".map(b => b.textContent)"
    )
    # At `done` the links are there, and two frames later (any paint queued before `done`
    # has run) they still are.
    live = await page.evaluate(links)
    assert live == [cited["id"][:8], "#7"]
    await page.evaluate(TWO_FRAMES)
    assert await page.evaluate(links) == live
    assert await page.locator("#messages .msg.user", has_text="what was said?").count() == 1
    await page.reload()
    await page.locator("#messages .msg.assistant").wait_for()
    assert await page.evaluate(links) == live


async def test_run_modal_opens_on_a_safe_control_and_terminate_asks_first(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    seed_task(api, issue=12, title="A running task " + "with a long title " * 8)
    gui = await gui_factory(api, viewport=PHONE)
    page = gui.page
    await gui.screen("board")
    await page.click(".card[data-issue='12'] .card-open")
    await page.locator("#run-modal").wait_for(state="visible")
    assert await page.evaluate("() => document.activeElement.id") == "run-close"
    await no_overflow(gui, "the run modal")
    await clickable(gui, "#run-close")
    await page.keyboard.press("Enter")  # Enter on the focused control closes, ends nothing
    await page.locator("#run-modal").wait_for(state="hidden")

    await page.click(".card[data-issue='12'] .card-open")
    terminations: list[str] = []
    page.on("request", lambda r: terminations.append(r.url) if "/terminate" in r.url else None)
    await page.click("#run-actions button.danger")
    confirm = page.locator("#confirm-dialog")
    await confirm.wait_for(state="visible")
    assert await page.evaluate("() => document.activeElement.id") == "confirm-cancel"
    await page.keyboard.press("Enter")  # the safe answer
    await confirm.wait_for(state="hidden")
    assert terminations == []
    await page.click("#run-actions button.danger")
    async with page.expect_request(lambda r: "/terminate" in r.url and r.method == "POST"):
        await page.click("#confirm-ok")
    assert gui.dialogs == []  # no window.confirm: the page's own dialog asked


async def _hold_spend(page: Any) -> asyncio.Queue[Any]:
    """Hold each request for the Dashboard's spend (made when the Board loads at sign-in):
    the page's own request, let go when the test says."""
    held: asyncio.Queue[Any] = asyncio.Queue()

    async def hold(route: Any) -> None:
        await held.put(route)

    await page.route("**/api/operator/spend*", hold)
    return held


async def test_a_signed_out_tab_goes_to_sign_in(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    # The operator's own send is what finds the session ended: the page is signed in and
    # live (nothing of its own left to ask but the spend, held), then the session ends.
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api, sign_in=False)
    await _hold_spend(gui.page)
    sessions_loaded: asyncio.Queue[str] = asyncio.Queue()
    gui.page.on(
        "requestfinished",
        lambda r: sessions_loaded.put_nowait(r.url) if "/chat/sessions" in r.url else None,
    )
    await gui.sign_in()
    await gui.page.wait_for_selector("body[data-live=stream]")
    # The stream's first open reloads the Board and then the sessions: the sign-in's load and
    # that one done, the page has nothing of its own left in flight (a reload answered 401
    # would find the session ended before the send, as CI once met).
    for _ in range(2):
        await asyncio.wait_for(sessions_loaded.get(), WAIT_MS / 1000)
    await gui.page.context.clear_cookies()  # the session ended (signed out elsewhere, expired)
    await gui.page.fill("#message", "are you there?")
    await gui.page.press("#message", "Enter")
    await gui.page.wait_for_selector("#signin:not([hidden])")
    assert "sign in again" in await gui.page.inner_text("#signin-error")
    assert "bearer" not in (await gui.page.inner_text("body")).lower()


# A request through the page's own API module (the same module instance its app uses).
SECOND_REQUEST = """async () => {
  const app = document.querySelector("script[type=module]").src;
  const { api } = await import(new URL("./api.js", app).href);
  await api.get("/api/operator/board").catch(() => {});
}"""


async def test_keys_typed_as_the_session_ends_stay_out_of_the_token_field(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    # The order CI met on a loaded machine: the operator is typing a message when a request
    # of the page's own (here the spend, held until then) finds the session ended; they type
    # on and press Enter. In the token field those keys were sent as a token, and "That
    # token is not valid" replaced why they were signed out.
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    held = await _hold_spend(page)
    await gui.sign_in()
    spend = await asyncio.wait_for(held.get(), WAIT_MS / 1000)
    await page.focus("#message")
    await page.keyboard.type("are you")
    await page.context.clear_cookies()  # the session ended (signed out elsewhere, expired)
    sign_ins: list[str] = []
    page.on("request", lambda r: sign_ins.append(r.url) if r.url.endswith("/gui/session") else None)
    await spend.continue_()  # reaches the service with no session
    await page.wait_for_selector("#signin:not([hidden])")
    # Another of the page's requests finds the session ended too (the reload the live stream
    # asks for when it opens, say): the focus stays where the first one put it.
    await page.evaluate(SECOND_REQUEST)
    await page.keyboard.type(" there?")
    await page.keyboard.press("Enter")
    await page.evaluate(TWO_FRAMES)
    assert await page.input_value("#token") == ""
    assert sign_ins == []
    assert "sign in again" in await page.inner_text("#signin-error")
    # Tab still reaches the token field from where the focus went.
    await page.keyboard.press("Tab")
    assert await page.evaluate("() => document.activeElement.id") == "token"


# The page's view of the world made observable: whether the tab is hidden (set by the test)
# and each desktop notification it creates (the browser's own, recorded on the way).
DESKTOP_SPY = """() => {
  window.__desktop = [];
  Object.defineProperty(document, 'hidden',
                        {configurable: true, get: () => Boolean(window.__hidden)});
  const Real = window.Notification;
  window.Notification = function (title, options) {
    window.__desktop.push(options.body);
    return new Real(title, options);
  };
  Object.defineProperty(window.Notification, 'permission', {get: () => Real.permission});
}"""


async def test_a_reply_ready_while_the_tab_is_hidden_reaches_the_desktop(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([[Delta("ready now")]], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    other = await (await api.post("/api/operator/chat/new", json={"title": "other"})).json()
    await api.post("/api/operator/chat/new", json={})
    gui = await gui_factory(api, permissions=["notifications"])
    page = gui.page
    assert await page.is_hidden("#desktop-alerts")  # allowed already: nothing to ask
    await page.evaluate(DESKTOP_SPY)
    await gui.send("take your time")
    await asyncio.wait_for(runtime.called.wait(), WAIT_MS / 1000)
    await page.click(f"[data-session='{other['id']}'] .session-open")
    await page.wait_for_function(
        "() => document.querySelector('#chat-title').textContent == 'other'"
    )
    await page.evaluate("() => { window.__hidden = true; }")  # the operator looks elsewhere
    gate.set()
    await page.wait_for_function("() => window.__desktop.length > 0")
    assert await page.evaluate("window.__desktop") == ["The reply you were waiting for is ready."]
    await page.locator("#toasts .toast", has_text="is ready").wait_for()  # and in the page


async def test_a_phone_shows_the_first_card_without_scrolling_past_empty_columns(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """On a phone the Board's columns stack; an empty one is its heading, not a 120 px panel
    (nine states, most of them empty: a merged card sat a screen and a half down)."""
    api = await api_factory(make_settings(tmp_path))

    def seed(db: Any) -> None:
        now = utcnow()
        db.add(
            Task(
                repo="steelframe-dev/demo",
                issue=9,
                title="Merged at last",
                state="merged",
                created_at=now,
                updated_at=now,
            )
        )

    api.services.db.call(seed)
    gui = await gui_factory(api, viewport={"width": 360, "height": 640})
    await gui.screen("board")
    card = ".column[data-state='merged'] .card[data-issue='9']"
    await gui.page.wait_for_selector(card)
    await no_overflow(gui, "a phone's Board")
    await clickable(gui, f"{card} .card-open")  # on the first screen, nothing scrolled


async def test_a_reload_stays_on_the_screen_it_was_on(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    """The address names the screen (`#board`, `#dashboard`): a reload (or a bookmark) opens
    that screen, the chat behind it reopened all the same; and a tab picked while the app
    still loads is where the operator stays."""
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api)
    page = gui.page
    await gui.send("a chat to reopen")  # an active chat: the sign-in's load reopens it
    await gui.wait_done()
    for screen in ("board", "dashboard"):
        await gui.screen(screen)
        await page.reload()
        await page.wait_for_selector("#messages .msg.user", state="attached")  # chat reopened
        await page.wait_for_selector(f"#screen-{screen}:not([hidden])")
        assert await page.evaluate("document.body.dataset.screen") == screen
        assert page.url.endswith(f"#{screen}")

    await gui.screen("chat")
    held = asyncio.Event()

    async def hold_board(route: Any) -> None:
        await held.wait()  # the sign-in's Board comes late: the load is still under way
        await route.continue_()

    await page.route("**/api/operator/board?*", hold_board)
    await page.reload()
    await page.wait_for_selector("#app:not([hidden])")
    await page.click("#tab-board")  # picked while the app loads
    held.set()
    await page.wait_for_selector("#messages .msg.user", state="attached")  # the load is done
    await page.wait_for_selector("#screen-board .card, #screen-board .empty", state="attached")
    assert await page.evaluate("document.body.dataset.screen") == "board"
