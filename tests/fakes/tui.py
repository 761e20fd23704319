"""Driving the TUI headless in tests: the app against a service, waits, and what it shows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.pilot import Pilot

from tests.conftest import ApiClient
from tui_client.app import SteelframeApp
from tui_client.chat import SessionItem
from tui_client.transcript import AssistantMessage, Notice

SIZE = (120, 40)
WAIT_SECONDS = 30.0  # generous for a loaded CI machine; a passing wait takes milliseconds


def tui(api: ApiClient, *, token: str | None = None, url: str | None = None) -> SteelframeApp:
    return SteelframeApp(api.operator_client(token=token, url=url))


async def until(
    pilot: Pilot[None], check: Callable[[], bool], what: str | Callable[[], str]
) -> None:
    """Poll the running app (short pauses let its workers and the service progress);
    `what` (or what it returns, at the time of failure) says what did not happen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for: {what() if callable(what) else what}")
        await pilot.pause(0.02)


def status(app: SteelframeApp) -> str:
    return app.chat.status_text()


def replies(app: SteelframeApp) -> list[AssistantMessage]:
    return list(app.chat.transcript.query(AssistantMessage))


def notices(app: SteelframeApp) -> list[str]:
    return [notice.text for notice in app.query(Notice)]


def session_titles(app: SteelframeApp) -> list[str]:
    return [item.title for item in app.chat.sessions.query(SessionItem)]


async def ready(pilot: Pilot[None], app: SteelframeApp) -> None:
    """Start-up requests answered (the events stream runs for as long as the app does)."""
    await until(
        pilot,
        lambda: not any(w.is_running for w in app.workers if w.group != "events"),
        "start-up requests",
    )


async def send(
    pilot: Pilot[None], app: SteelframeApp, text: str, *, wait: bool = True
) -> AssistantMessage:
    count = len(replies(app))
    app.chat.composer.focus()
    app.chat.composer.value = text
    await pilot.press("enter")
    await until(pilot, lambda: len(replies(app)) > count, "the reply to appear")
    message = replies(app)[-1]
    if wait:
        await until(
            pilot, lambda: not message.streaming and not app.chat.state.busy, "the turn to end"
        )
    return message
