"""A page left open keeps its times true: a card's, a Dashboard row's "just now" becomes
"2 h ago" as the hours pass, and the sidebar's Today becomes Yesterday after midnight, with
no event or reload to redraw them (an operator's Board stays open all day)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.clock import utcnow
from bot.lifecycle.models import Task
from tests.browser.conftest import GuiFactory
from tests.conftest import make_settings


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
    gui = await gui_factory(api, sign_in=False)
    page = gui.page
    await page.clock.install()  # the page's clock, moved on by the test below
    await gui.sign_in()
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
