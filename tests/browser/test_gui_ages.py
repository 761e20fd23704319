"""A page left open keeps its times true: a card's, a Dashboard row's "just now" becomes
"2 h ago" as the hours pass, and the sidebar's Today becomes Yesterday after midnight, with
no event or reload to redraw them (an operator's Board stays open all day)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bot.clock import utcnow
from bot.lifecycle.models import Task
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings


def zone_at_midday_now() -> str:
    """A time zone whose clock reads between 12:00 and 13:00 now (the Etc/GMT names count
    hours west of Greenwich, so UTC+5 is Etc/GMT-5)."""
    east = 12 - time.gmtime().tm_hour  # -11 to +12: each has a zone
    return f"Etc/GMT{-east:+d}" if east else "Etc/GMT"


async def test_ages_and_day_groups_follow_the_clock_on_an_open_page(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))

    def seed(db: Any) -> None:
        now = utcnow()
        db.add(
            Task(
                repo="steelframe-dev/demo",
                issue=5,
                title="Delivered a while ago",
                state="delivered",
                pr_url="https://github.example/steelframe-dev/demo/pull/6",
                created_at=now,
                updated_at=now,
            )
        )

    api.services.db.call(seed)
    await api.post("/api/operator/chat/new", json={"title": "Earlier today"})
    # The page's day is the browser's local one: it runs where it is midday now, so 26 hours on
    # is the next day (on the machine's own zone a run after 22:00 landed two days on).
    gui = await gui_factory(api, sign_in=False, timezone_id=zone_at_midday_now())
    page = gui.page
    await page.clock.install()  # the page's clock, moved on by the test below
    await gui.sign_in()
    # The zone above as Chromium reads it (13 if the hour turned meanwhile).
    assert await page.evaluate("new Date().getHours()") in (12, 13)
    card_age = page.locator(".card[data-issue='5'] .age")
    row_age = page.locator("#dash-delivered .age")
    await card_age.wait_for(state="attached")
    assert await card_age.inner_text() == "just now"
    assert await row_age.inner_text() == "just now"
    group = page.locator("#session-list .group")
    assert await group.all_text_contents() == ["Today"]

    await page.clock.fast_forward("26:00:00")
    await page.wait_for_function(
        "() => document.querySelector(\".card[data-issue='5'] .age\").textContent === '1 d ago'"
    )
    assert await row_age.inner_text() == "1 d ago"
    await page.wait_for_function(
        "() => document.querySelector('#session-list .group')?.textContent === 'Yesterday'"
    )
