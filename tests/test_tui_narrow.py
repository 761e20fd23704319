"""The TUI in an 80x24 terminal (a common size): every key a screen offers is in its footer
or in the keys help (`f3`, or `?` where no text is typed), whose key comes first so it is
never the one cut; the footer shows whole keys only; the sidebar gives the chat the room."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from tests.conftest import ApiClient, make_settings
from tests.fakes.tui import ready, tui, until
from tui_client.app import SteelframeApp

NARROW = (80, 24)
APP_KEYS = {"^q": "Quit", "f1": "Chat", "f2": "Board", "^r": "Refresh", "^p": "palette"}
CHAT_KEYS = {"^n": "New chat", "^f": "Focus #N", "^t": "Thinking", "^g": "Hits", **APP_KEYS}
LIST_KEYS = {"d": "Delete chat", "e": "Discuss #N", **CHAT_KEYS}
BOARD_KEYS = {"⏎": "Details", "e": "Discuss", "t": "Terminate", "a": "Archive", "l": "Log"}


@pytest.fixture
async def api(api_factory: Any, tmp_path: Path, redis_url: str) -> ApiClient:
    return await api_factory(make_settings(tmp_path, redis_url=redis_url))


def footer(app: SteelframeApp) -> list[tuple[str, str, int, int]]:
    """The footer's keys as drawn: (key, words, first column, column after it)."""
    keys = app.screen.query(FooterKey)
    return [(k.key_display, k.description, k.region.x, k.region.right) for k in keys]


def help_open(app: SteelframeApp) -> bool:
    return bool(app.screen.query("#keys-help-text"))


async def keys_help(pilot: Pilot[None], app: SteelframeApp, key: str = "f3") -> str:
    """What the keys help lists, opened with `key` and closed again."""
    await pilot.press(key)
    await until(pilot, lambda: help_open(app), "the keys help")
    text = str(app.screen.query_one("#keys-help-text", Static).render())
    await pilot.press(key)  # the key that opened it closes it
    await until(pilot, lambda: not help_open(app), "the keys help closed")
    return text


async def assert_every_key_reachable(
    pilot: Pilot[None], app: SteelframeApp, offered: dict[str, str], key: str = "f3"
) -> None:
    shown = footer(app)
    assert shown[0][:2] == ("f3", "Keys"), shown  # first: never the key a narrow footer cuts
    assert all(right <= NARROW[0] for *_, right in shown), f"a key is cut: {shown}"
    listed = await keys_help(pilot, app, key)
    in_help = set()
    for line in listed.splitlines():  # "^f/f  Focus #N": each key of the line, its words
        keys, words = line.split(maxsplit=1)
        in_help |= {(one, words) for one in keys.split("/")}
    for key_display, words in offered.items():
        visible = (key_display, words) in [(k, w) for k, w, *_ in shown]
        assert visible or (key_display, words) in in_help, (
            f"{key_display} {words} is neither in the footer {shown} nor in the help {listed!r}"
        )
    assert len(shown) - 1 < len(offered), "all fit: the help is not what this test checks"


async def test_at_80_columns_every_chat_key_is_in_the_footer_or_the_keys_help(
    api: ApiClient,
) -> None:
    app = tui(api)
    async with app.run_test(size=NARROW) as pilot:
        await ready(pilot, app)
        await until(pilot, lambda: bool(footer(app)), "the footer")
        await assert_every_key_reachable(pilot, app, CHAT_KEYS)
        # `?` in the composer is a letter ("why?"), not the help.
        await pilot.press("w", "h", "y", "question_mark")
        assert app.chat.composer.value == "why?" and not help_open(app)
        app.query_one("#sessions").focus()
        await until(pilot, lambda: "Delete chat" in str(footer(app)), "the list's keys")
        await assert_every_key_reachable(pilot, app, LIST_KEYS, key="question_mark")


async def test_at_80_columns_every_board_key_is_in_the_footer_or_the_keys_help(
    api: ApiClient,
) -> None:
    app = tui(api)
    async with app.run_test(size=NARROW) as pilot:
        await ready(pilot, app)
        await pilot.press("f2")
        await until(pilot, lambda: "Terminate" in str(footer(app)), "the Board's keys")
        await assert_every_key_reachable(pilot, app, {**BOARD_KEYS, **APP_KEYS}, "question_mark")


@pytest.mark.parametrize(("columns", "sidebar"), [(80, 19), (120, 28), (160, 32)])
async def test_the_sidebar_leaves_the_chat_room_on_a_narrow_terminal(
    api: ApiClient, columns: int, sidebar: int
) -> None:
    app = tui(api)
    async with app.run_test(size=(columns, 24)) as pilot:
        await ready(pilot, app)
        await pilot.pause()
        assert app.query_one("#sidebar").region.width == sidebar
        assert app.query_one("#conversation").region.width == columns - sidebar
