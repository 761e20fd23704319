"""Long lines in an 80x24 terminal: a code block's line longer than the transcript wraps, so
all of it can be read (Textual's fence scrolls sideways with no scrollbar and no key: the
end of a traceback's line or a command was out of reach); a long word wraps too; and a long
title in the status line is cut, not the key after it, and in the chat's header (a narrow
terminal, a focus after it), not wrapped;
and a reply longer than the transcript is read from the composer with pageup and pagedown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.cells import cell_len
from textual.widgets import Static
from textual.widgets._markdown import MarkdownFence

from tests.conftest import ApiClient, make_settings
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import ready, send, status, tui, until
from tui_client.chat_state import ChatState, header_line

NARROW = (80, 24)
COMMAND = "kubectl rollout restart deployment/steelframe-worker --namespace=prod-east-1 && END"


async def test_a_code_line_longer_than_the_transcript_wraps_whole_into_view(
    api_factory: Any, tmp_path: Path
) -> None:
    text = f"Run this:\n\n```sh\n{COMMAND}\n```\n\nand a {'x' * 120} word."
    runtime = ScriptedRuntime([reply(text)])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=NARROW) as pilot:
        await ready(pilot, app)
        message = await send(pilot, app, "how do I restart the worker?")
        fence = message.reply.query_one(MarkdownFence)
        await until(pilot, lambda: fence.region.width > 0, "the code block laid out")
        transcript = app.chat.transcript
        for widget in [fence, *fence.query("*"), *message.reply.query("*")]:
            assert widget.virtual_size.width <= transcript.region.width, widget
            assert widget.region.right <= transcript.region.right, widget
        assert fence.max_scroll_x == 0
        code = fence.query_one("#code-content")
        assert code.region.height >= 2 + 2, code.region  # two lines and its padding


async def test_a_long_proposal_title_is_cut_in_the_status_line_not_its_key(
    api: ApiClient,
) -> None:
    subject = "the flaky login test that fails on every third nightly run of the build"
    app = tui(api)
    async with app.run_test(size=NARROW) as pilot:
        await ready(pilot, app)
        await send(pilot, app, f"file an issue for {subject}")
        assert status(app) == f'Chat · Proposal "{subject}" · press y to file'
        line = app.chat.query_one("#status-line", Static)
        shown = str(line.render())
        assert shown.endswith('…" · press y to file'), shown
        assert cell_len(shown) <= line.content_region.width
        await pilot.resize_terminal(160, 24)
        await until(pilot, lambda: str(line.render()) == status(app), "the whole title")


async def test_the_chat_header_stays_one_line_with_its_focus_whole(api: ApiClient) -> None:
    subject = "the flaky login test that fails on every third nightly run of the build"
    app = tui(api)
    async with app.run_test(size=NARROW) as pilot:
        await ready(pilot, app)
        await send(pilot, app, f"file an issue for {subject}")
        app.chat.state.focus = 12345678  # as a focus set with the message shows it
        app.chat.refresh_status()
        header = app.chat.query_one("#chat-header", Static)
        await until(pilot, lambda: "#12345678" in str(header.render()), "the focus shown")
        shown = str(header.render())
        assert shown.endswith("… · focused on #12345678"), shown
        assert header.region.height == 1 and cell_len(shown) <= header.content_region.width


def test_the_header_cuts_the_title_and_keeps_the_focus() -> None:
    state = ChatState(title="A title far too long for the header of a narrow terminal", focus=12)
    shown = header_line(state, width=40)
    assert shown.endswith("… · focused on #12") and cell_len(shown) <= 40, shown
    assert header_line(state) == f"{state.title} · focused on #12"
    assert header_line(ChatState(), width=40) == "New chat"


async def test_pageup_in_the_composer_scrolls_a_long_reply(
    api_factory: Any, tmp_path: Path
) -> None:
    text = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(30))
    runtime = ScriptedRuntime([reply(text)])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    app = tui(api)
    async with app.run_test(size=NARROW) as pilot:
        await ready(pilot, app)
        await send(pilot, app, "the whole story, please")
        transcript = app.chat.transcript
        await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y > 0, "the end")
        assert app.focused is app.chat.composer
        await pilot.press("pageup")
        await until(pilot, lambda: transcript.scroll_y < transcript.max_scroll_y, "scrolled up")
        await pilot.press("pagedown")
        await until(pilot, lambda: transcript.scroll_y == transcript.max_scroll_y, "back down")
        assert app.focused is app.chat.composer
