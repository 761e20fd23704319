"""The web GUI on a service without the operator events stream (a 404, not a 503): the page
polls the Board, which stays current, and does not ask for the stream again within the
window a refusal for now would have it asked several times (EventSource hides the status: the
page asks once with a plain request to learn it). A refusal for now (a 503 while Redis is
away) is still re-opened with the growing pause: tests/browser/test_gui_events_redis_failure.py.
The page's pauses run at TIME_SCALE (tests/browser/faster_pauses.py), in their proportions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from bot.lifecycle.states import TaskState
from bot.lifecycle.tasks import new_task
from bot.lifecycle.transition import Move, apply
from tests.browser.conftest import WAIT_MS, GuiFactory, board_json, cards
from tests.browser.faster_pauses import FASTER_PAUSES
from tests.conftest import make_settings
from tests.fakes.no_events import WithoutEvents

REPO = "octo/widgets"
ISSUE = 7


def _queued(session: Session) -> int:
    return new_task(
        session, repo=REPO, issue=ISSUE, title="Polled", origin_session=None, actor="test"
    ).id


async def _asked(absent: WithoutEvents, count: int) -> None:
    """Wait until the stream was asked `count` times (a hang deadline, not a timing)."""
    async with asyncio.timeout(WAIT_MS / 1000):
        while absent.asked < count:
            absent.asked_event.clear()
            await absent.asked_event.wait()


async def test_without_the_events_stream_the_gui_polls_and_stops_asking_for_it(
    api_factory: Any, gui_factory: GuiFactory, tmp_path: Path
) -> None:
    absent = WithoutEvents()
    api = await api_factory(make_settings(tmp_path), plugins=absent.plugins())
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    await page.add_init_script(FASTER_PAUSES)
    await gui.sign_in()
    await page.wait_for_selector("body[data-live=poll]", timeout=WAIT_MS)
    await gui.screen("board")
    # EventSource's request, refused, and the one that learns why (a 404): no third.
    await _asked(absent, 2)

    task_id = api.services.db.call(_queued)
    card = f".card[data-issue='{ISSUE}']"
    await page.wait_for_selector(card, timeout=WAIT_MS)  # a poll brought it
    api.services.db.call(apply, task_id, Move(TaskState.RUNNING, actor="test"))
    await page.wait_for_selector(f".column[data-state=running] {card}", timeout=WAIT_MS)
    assert cards(await board_json(gui)) == {str(ISSUE): "running"}

    # Three more polls (12 s at least, scaled): a refusal for now would have re-opened the
    # stream after 1, 2, 4 and 8 s meanwhile (scaled alike).
    for _ in range(3):
        async with page.expect_response(lambda r: "/api/operator/board?limit" in r.url):
            pass
    assert absent.asked == 2
    assert await page.evaluate("document.body.dataset.live") == "poll"
    # The sign-in page's own 401 (no session yet) and the two 404s, nothing else.
    assert [e for e in gui.console_errors if "401" not in e and "404" not in e] == []
