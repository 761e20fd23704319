"""The TUI against a real service: headless Textual (`run_test` + `Pilot`), real HTTP."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web
from textual.app import App, ComposeResult
from textual.widgets import Input

from bot.runtimes.base import Delta, Route, RuntimeEvent, RuntimeRequest, Thinking
from memory import ChunkIn, ChunkSource, add_chunk
from tests.conftest import ApiClient, make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import (
    SIZE,
    listed_session,
    notices,
    ready,
    replies,
    send,
    session_titles,
    status,
    tui,
    turn_over,
    until,
)
from tests.fakes.tui_openings import discuss_draft, held_turn, unreachable_at_start
from tui_client.api import OperatorClient
from tui_client.app import SteelframeApp
from tui_client.chat import SessionItem, SessionList
from tui_client.modals import ConfirmScreen, IssuePrompt
from tui_client.transcript import Notice, UserMessage

DEPLOY_NOTE = "The deploy switches traffic blue-green after the canary health check passes."


class ThinkThenWait:
    """A runtime that thinks, then waits for `release` before replying (to look mid-turn)."""

    name = "held"
    model = "held-model"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        yield Route(model=self.model, endpoint="held")
        yield Thinking("Weighing the deploy logs")
        await self.release.wait()
        yield Delta("The build is **green**.")


async def scripted_service(api_factory: Any, tmp_path: Path, runtime: Any) -> ApiClient:
    return await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)


def remember_deploy_note(api: ApiClient) -> None:
    """Session memory holds one note on #42, which a deploy question retrieves."""
    repo = api.services.settings.agents["default"].repo
    chunk = ChunkIn(text=DEPLOY_NOTE, source=ChunkSource.NOTE, repo=repo, issue=42, key="note:42")
    api.services.db.call(add_chunk, chunk)


async def test_send_streams_the_reply_as_markdown_and_titles_the_session(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        assert status(app) == "Chat · New chat"
        message = await send(pilot, app, "What is the status of the deploy?")
        assert "No model is configured" in message.reply.source
        assert [u.text for u in app.query(UserMessage)] == ["What is the status of the deploy?"]
        await until(
            pilot,
            lambda: (
                session_titles(app) == ["What is the status of the deploy?"]
                and app.chat.sessions.index == 0
            ),
            "the titled, highlighted session",
        )
        assert status(app) == "Chat · What is the status of the deploy?"


async def test_thinking_shows_inline_while_streaming_then_collapses(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ThinkThenWait()
    api = await scripted_service(api_factory, tmp_path, runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "is the build green?", wait=False)
        await until(pilot, lambda: "Weighing" in message.reasoning, "thinking tokens")
        assert message.thinking.display and not message.thinking.collapsed
        assert message.thinking.title == "Thinking…"
        assert status(app) == "Chat · thinking · esc stop"
        runtime.release.set()
        await until(pilot, lambda: turn_over(app, message), "the turn to end")
        assert message.thinking.collapsed and message.thinking.title == "Thinking (ctrl+t)"
        assert str(message.thinking_text.render()) == "Weighing the deploy logs"
        assert message.reply.source == "The build is **green**."


class ThinkTwiceThenWait(ThinkThenWait):
    """Thinks, waits for `more`, thinks again, then waits for `release` before replying."""

    def __init__(self) -> None:
        super().__init__()
        self.more = asyncio.Event()

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        yield Route(model=self.model, endpoint="held")
        yield Thinking("Weighing the deploy logs")
        await self.more.wait()
        yield Thinking(", then the canary")
        await self.release.wait()
        yield Delta("The build is **green**.")


async def test_ctrl_t_closes_the_thinking_while_it_streams_and_it_stays_closed(
    api_factory: Any, tmp_path: Path
) -> None:
    """ctrl+t closed the streaming Thinking section, and the next thinking token opened it
    again: while a model thinks (many seconds, many tokens) the key did nothing that lasted."""
    runtime = ThinkTwiceThenWait()
    api = await scripted_service(api_factory, tmp_path, runtime)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "is the build green?", wait=False)
        await until(pilot, lambda: "Weighing" in message.reasoning, "thinking tokens")
        assert not message.thinking.collapsed
        await pilot.press("ctrl+t")
        assert message.thinking.collapsed
        runtime.more.set()
        await until(pilot, lambda: "canary" in message.reasoning, "more thinking tokens")
        assert message.thinking.collapsed  # the operator closed it: it stays closed
        await pilot.press("ctrl+t")
        assert not message.thinking.collapsed
        runtime.release.set()
        await until(pilot, lambda: turn_over(app, message), "the turn to end")


async def test_grounded_second_draft_replaces_the_first_and_hits_row_expands(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime(
        [reply("FIRST-DRAFT says nothing useful."), reply("Per #42 the deploy is blue-green.")]
    )
    api = await scripted_service(api_factory, tmp_path, runtime)
    remember_deploy_note(api)
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "how does the blue-green deploy switch traffic?")
        assert len(runtime.requests) == 2  # the first draft cited nothing: a grounded re-draft
        assert message.reply.source == "Per #42 the deploy is blue-green."
        assert "FIRST-DRAFT" not in message.reply_text
        assert message.hits is not None and message.hits.title == "retrieve 1 hits (ctrl+g)"
        assert message.hits.collapsed
        await pilot.click(message.hits)
        await until(pilot, lambda: not message.hits.collapsed, "the hits row to expand")  # type: ignore[union-attr]
        lines = [str(hit.render()) for hit in message.hits.query(".hit")]
        assert len(lines) == 1
        assert re.fullmatch(rf"note · score 0\.\d\d · #42 · {re.escape(DEPLOY_NOTE)}", lines[0])
        # reopening the session rebuilds the hits row from the stored turn
        app.chat.open_session(app.chat.state.session_id or "")
        await until(
            pilot,
            lambda: bool(replies(app)) and replies(app)[0] is not message,
            "the reopened transcript",
        )
        reopened = replies(app)[0]
        await until(pilot, lambda: reopened.hits is not None, "the reopened hits row")
        assert reopened.hits is not None and reopened.hits.title == "retrieve 1 hits (ctrl+g)"
        assert reopened.reply.source == "Per #42 the deploy is blue-green."


async def test_status_line_shows_the_live_retrieve_phase(api_factory: Any, tmp_path: Path) -> None:
    async with held_turn(
        api_factory,
        tmp_path,
        "blue-green deploy traffic?",
        answer="Per #42, yes.",
        before=remember_deploy_note,
    ) as held:
        app, pilot = held.app, held.pilot
        await until(pilot, lambda: "retrieve" in status(app), "the retrieve phase")
        assert re.fullmatch(r"Chat · retrieve [123]/3 · \d+ hits? · esc stop", status(app))
        held.release()
        await until(pilot, lambda: status(app) == "Chat · blue-green deploy traffic?", "the end")


async def test_stop_key_aborts_the_turn_and_the_next_message_starts_fresh(
    api_factory: Any, tmp_path: Path
) -> None:
    async with held_turn(api_factory, tmp_path, "a long question") as held:
        app, pilot, message = held.app, held.pilot, held.message
        assert "esc stop" in status(app)
        await pilot.press("escape")
        await until(pilot, lambda: turn_over(app, message), "the turn to stop")
        assert held.runtime.cancelled.is_set()
        assert "Stopped" in notices(app)[-1]
        assert "esc stop" not in status(app)
        sessions = (await (await held.api.get("/api/operator/chat/sessions")).json())["sessions"]
        assert all(not s["turns"] for s in sessions)  # a stopped turn is not persisted
        held.release()
        again = await send(pilot, app, "a short one")
        assert again.reply.source == "The long answer."


async def test_ctrl_f_during_a_turn_says_why_it_waits(api_factory: Any, tmp_path: Path) -> None:
    """ctrl+f (shown in the footer all along) did nothing at all while a turn ran: no
    prompt, no word. It is refused as ctrl+n is then, with the note saying esc stops it."""
    async with held_turn(api_factory, tmp_path, "a long question") as held:
        app, pilot = held.app, held.pilot
        await pilot.press("ctrl+f")
        await until(
            pilot, lambda: any("A turn is in flight" in n for n in notices(app)), "the refusal"
        )
        assert not isinstance(app.screen, IssuePrompt)
        held.release()
        await until(pilot, lambda: turn_over(app, held.message), "the turn to end")


async def test_session_switch_and_reopen_continue_in_place(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "first topic")
        first_id = app.chat.state.session_id
        await pilot.press("ctrl+n")
        await until(
            pilot,
            lambda: app.chat.state.session_id != first_id and replies(app) == [],
            "a new, empty chat",
        )
        assert status(app) == "Chat · New chat"
        await send(pilot, app, "second topic")
        await until(
            pilot, lambda: session_titles(app) == ["second topic", "first topic"], "both sessions"
        )
        app.chat.sessions.focus()

        def first_highlighted() -> bool:
            highlighted = app.chat.sessions.highlighted_child
            return isinstance(highlighted, SessionItem) and highlighted.session_id == first_id

        # As a person does: down until the first topic is highlighted (where the highlight
        # starts depends on when the list last refreshed), then enter. Live updates keep
        # re-reading the list meanwhile; they must not move the highlight (SessionList.show).
        if not first_highlighted():
            await pilot.press("down")
        await until(pilot, first_highlighted, "the first topic highlighted")
        await pilot.press("enter")
        await until(pilot, lambda: app.chat.state.session_id == first_id, "the first session")
        await until(
            pilot,
            lambda: [u.text for u in app.query(UserMessage)] == ["first topic"],
            "its transcript",
        )
        assert replies(app)[0].thinking.collapsed  # reasoning comes back collapsed
        await send(pilot, app, "more on the first")
        stored = await (await api.get(f"/api/operator/chat/session/{first_id}")).json()
        assert [m["content"] for m in stored["messages"] if m["role"] == "user"] == [
            "first topic",
            "more on the first",
        ]
    # a new client reopens the active session with its transcript
    again = tui(api)
    async with again.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(again.query(UserMessage)) == 2, "the reopened session")
        assert again.chat.state.session_id == first_id


async def test_enter_on_a_session_leaves_the_keys_to_the_composer(api: ApiClient) -> None:
    """The keys stayed with the session list after `enter` reopened a chat: what the
    operator typed next ran the list's keys (`d` asked to delete the chat, a `y` in the
    same word would answer it) instead of being their message to the reopened chat."""
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "first topic")
        first_id = app.chat.state.session_id
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.chat.state.session_id != first_id, "a new chat")
        await send(pilot, app, "second topic")
        await until(
            pilot, lambda: session_titles(app) == ["second topic", "first topic"], "both sessions"
        )
        app.chat.sessions.focus()
        app.chat.sessions.index = 1  # the first topic
        await pilot.press("enter")
        await until(pilot, lambda: app.chat.state.session_id == first_id, "the first session")
        assert app.chat.composer.has_focus
        await pilot.press("d", "a", "y")
        assert app.chat.composer.value == "day"
        assert not isinstance(app.screen, ConfirmScreen)


async def test_discuss_from_the_session_list_opens_an_empty_focused_chat(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        app.chat.sessions.focus()
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, IssuePrompt), "the issue prompt")
        await pilot.press("x", "enter")
        assert "positive integer" in str(app.screen.query_one("#issue-error").render())
        app.screen.query_one(Input).value = ""
        await pilot.press("1", "2", "enter")
        await until(pilot, lambda: app.chat.state.focus == 12, "the Discuss session")
        await until(pilot, lambda: session_titles(app) == ["Discuss #12"], "the session list")
        assert app.chat.state.title == "Discuss #12"
        assert app.chat.composer.value == "" and app.chat.composer.has_focus
        assert replies(app) == []
        assert status(app) == "Chat · Discuss #12 · focused on #12"
        stored = await (
            await api.get(f"/api/operator/chat/session/{app.chat.state.session_id}")
        ).json()
        assert stored["messages"] == []  # Discuss does not auto-send


async def test_decide_draft_shows_publish_status_only_with_an_empty_composer(
    api: ApiClient,
) -> None:
    async with discuss_draft(api, 7) as drafted:
        app, pilot, message = drafted.app, drafted.pilot, drafted.message
        assert app.chat.state.intent == "decide"
        assert status(app) == "Chat · Decision draft · P publish to #7"
        assert "press y to file" not in status(app)
        decision = message.query_one(".decision")
        assert "ship the blue-green deploy" in str(decision.render())
        await pilot.press("y")  # no proposal to file: `y` is just a letter
        assert app.chat.composer.value == "y"
        assert status(app) == "Chat · Discuss #7 · focused on #7"
        await pilot.press("backspace")
        assert status(app) == "Chat · Decision draft · P publish to #7"
        # without a GitHub App the service refuses; the error shows and the draft stays
        await pilot.press("P")
        await until(pilot, lambda: bool(notices(app)), "the refusal")
        assert notices(app)[-1] == (
            "the GitHub App is not configured: nothing can be published (503 unavailable)"
        )
        assert app.chat.composer.value == ""
        assert status(app) == "Chat · Decision draft · P publish to #7"
        # the draft survives a reopen of the session
        app.chat.open_session(app.chat.state.session_id or "")
        await until(
            pilot, lambda: bool(replies(app)) and replies(app)[0] is not message, "the reopen"
        )
        await until(pilot, lambda: bool(replies(app)[0].query(".decision")), "the reopened draft")
        await ready(pilot, app)  # the reopen's worker ends the switch after the draft shows
        assert status(app) == "Chat · Decision draft · P publish to #7"


async def test_file_intent_without_github_offers_y_to_file(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "file an issue for flaky CI retries")
        if app.chat.state.pending_title is None:
            raise AssertionError(f"expected a pending proposal, notices: {notices(app)}")
        assert status(app) == 'Chat · Proposal "flaky CI retries" · press y to file'


async def test_the_chat_is_called_by_its_subject_as_in_the_session_list(api: ApiClient) -> None:
    """The session list names a filing chat by its subject (the service's label, "Flaky
    login test"); the header over the transcript and the status line named the same chat by
    the operator's request ("file an issue for the flaky login test"), as if another one."""
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "file an issue for the flaky login test")
        await until(pilot, lambda: session_titles(app) == ["Flaky login test"], "the list")
        header = app.chat.query_one("#chat-header")
        await until(
            pilot,
            lambda: str(header.render()) == "Flaky login test",
            lambda: str(header.render()),
        )
        app.chat.composer.value = "and also"  # the proposal's status gives way to the title
        assert status(app) == "Chat · Flaky login test"


async def test_delete_asks_first_and_no_keeps_the_chat(api: ApiClient) -> None:
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "keep me")
        kept_id = app.chat.state.session_id
        await pilot.press("ctrl+n")
        await until(
            pilot,
            lambda: app.chat.state.session_id != kept_id and replies(app) == [],
            "a new, empty chat",
        )
        await send(pilot, app, "delete me")
        await until(pilot, lambda: session_titles(app) == ["delete me", "keep me"], "two sessions")
        app.chat.sessions.focus()
        app.chat.sessions.index = 0
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        assert "delete me" in app.screen.question  # type: ignore[attr-defined]
        await pilot.press("n")
        await pilot.pause()
        assert session_titles(app) == ["delete me", "keep me"]
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: session_titles(app) == ["keep me"], "the deletion")
        assert replies(app) == [] and app.chat.state.session_id is None
        sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
        assert [s["title"] for s in sessions] == ["keep me"]


async def test_unreachable_service_is_shown_and_ctrl_r_recovers_once_it_is_up(
    api: ApiClient,
) -> None:
    async with unreachable_at_start(api) as started:
        app, pilot, url = started.app, started.pilot, started.url
        assert f"cannot reach the Steelframe service at {url}" in notices(app)[0]
        assert status(app) == "Chat · service unreachable · ctrl+r retry"
        message = await send(pilot, app, "anyone there?")
        assert "cannot reach" in message.query_one(Notice).text
        assert app.is_running
        await pilot.press("f2")
        board_status = app.board.query_one("#board-status")
        await until(pilot, lambda: "unavailable" in str(board_status.render()), "the board error")
        assert "cannot reach" in str(board_status.render())
        await pilot.press("f1")
        # the service comes up on that address: ctrl+r picks it up, no restart needed
        await started.come_up()
        await pilot.press("ctrl+r")
        await until(pilot, lambda: status(app) == "Chat · New chat", lambda: status(app))
        await send(pilot, app, "back again")
        await until(pilot, lambda: session_titles(app) == ["back again"], "the new session")


async def test_wrong_token_is_shown_in_the_app(api: ApiClient) -> None:
    app = tui(api, token="sfo_not-the-token")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: bool(notices(app)), "the error")
        assert notices(app)[0].startswith(
            "The service refused the operator token (invalid bearer token)"
        )
        assert status(app) == "Chat · token refused · ctrl+r retry"
        message = await send(pilot, app, "hello?")
        assert "refused the operator token" in message.query_one(Notice).text
        assert app.is_running


async def test_a_url_that_is_not_the_service_says_to_check_the_url(aiohttp_server: Any) -> None:
    """--url pointing at another web server (a typo'd port, the GitHub sandbox's address):
    every request answered 404 with its own page, which the TUI showed as "Not Found (404
    http_error)", not saying that the address is not a Steelframe service."""
    other = await aiohttp_server(web.Application())  # any web server but Steelframe
    url = str(other.make_url("")).rstrip("/")
    app = SteelframeApp(OperatorClient(url, "sfo_token"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: bool(notices(app)), "the error")
        said = notices(app)[0]
        assert said.startswith("Not Found (404)"), said
        assert "not as a Steelframe service" in said and "Check --url" in said, said


async def test_a_chat_title_longer_than_the_sidebar_ends_in_an_ellipsis(api: ApiClient) -> None:
    """A long title was cut at the sidebar's edge mid-word ("hello, what can you do?
    Ünïcød"), reading as if that were the whole title."""
    title = "Why does the nightly build take forty minutes — ünïcødé"
    await api.post("/api/operator/chat/new", json={"title": title})
    app = tui(api)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await until(pilot, lambda: session_titles(app) == [title], lambda: str(session_titles(app)))
        label = app.chat.sessions.query_one(SessionItem).label
        shown = label.render_line(0).text.strip()
        assert shown.endswith("…") and title.startswith(shown[:-1]), shown


class _ListApp(App[None]):
    def compose(self) -> ComposeResult:
        yield SessionList()


async def test_a_live_reload_keeps_the_operators_highlight_and_the_items() -> None:
    """Live updates re-read the session list often: one arriving while the operator moves
    through the list changes what changed in place, and moves neither the highlight nor
    the items `enter` acts on (it used to rebuild the list and highlight the open chat)."""
    sessions = [listed_session(id="b", title="second"), listed_session(id="a", title="first")]
    app = _ListApp()
    async with app.run_test(size=SIZE) as pilot:
        listing = app.query_one(SessionList)
        await listing.show(sessions, unseen=lambda s: False, current="b")
        assert listing.index == 0
        listing.focus()
        await pilot.press("down")
        items = list(listing.query(SessionItem))
        await listing.show(sessions, unseen=lambda s: s.id == "b", current="b")
        assert listing.index == 1 and list(listing.query(SessionItem)) == items
        assert [str(item.label.render()) for item in items] == ["● second", "first"]
        # a different list is rebuilt; the operator's highlight stays on its session
        newer = [listed_session(id="c"), *sessions]
        await listing.show(newer, unseen=lambda s: False, current="b")
        highlighted = listing.highlighted_child
        assert isinstance(highlighted, SessionItem) and highlighted.session_id == "a"
