"""Long words in the conversation: a pasted URL, a log line or a path with no space in it
wraps inside the reading column, at a phone's size and a laptop's, and the conversation never
scrolls sideways (the text cut off at its right edge, docs/gui.md "Window sizes")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.clock import utcnow
from bot.models import ChatTurn
from tests.browser.conftest import GuiFactory
from tests.browser.test_gui_layout import LAPTOP, PHONE
from tests.conftest import ApiClient, make_settings

URL = "https://ci.example.com/" + "a-very-long-path-segment/" * 24
WORD = "x" * 400
PATH = "src/" + "deeply_nested_package/" * 16 + "module.py"

# Every message part that is wider than the conversation's box, with by how much: the box
# scrolls sideways (`overflow: auto`), so the page as a whole shows no overflow.
TOO_WIDE = """() => {
  const box = document.querySelector('#messages');
  const right = box.getBoundingClientRect().right;
  const wide = [...box.querySelectorAll('.msg *')]
    .filter(el => el.getClientRects().length && el.getBoundingClientRect().right > right + 1)
    .map(el => el.className || el.tagName);
  return {sideways: box.scrollWidth - box.clientWidth, wide: [...new Set(wide)]};
}"""


def seed_long_words(api: ApiClient, sid: str) -> None:
    def seed(db: Any) -> None:
        now = utcnow()
        hit = {
            "source": "worker_session:" + WORD,
            "score": 0.91,
            "issue": 12,
            "session_id": "7ff56c48" * 8,
            "paths": [PATH, PATH],
            "preview": f"Traceback at {URL}\n{WORD}",
        }
        db.add_all(
            [
                ChatTurn(
                    id="long-1",
                    session_id=sid,
                    seq=0,
                    role="user",
                    content=f"why does {URL} fail with {WORD}?",
                    meta={},
                    created_at=now,
                ),
                ChatTurn(
                    id="long-2",
                    session_id=sid,
                    seq=1,
                    role="assistant",
                    content=f"It fails in `{PATH}`:\n\n    {WORD}\n\nSee {URL}",
                    reasoning=f"The log says {WORD} at {PATH}",
                    meta={"retrieved": [hit], "retrieve_hits": 1},
                    created_at=now,
                ),
            ]
        )

    api.services.db.call(seed)


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390x844", "1280x800"])
async def test_a_long_word_wraps_in_the_conversation(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, viewport: dict[str, int]
) -> None:
    api = await api_factory(make_settings(tmp_path))
    session = await (await api.post("/api/operator/chat/new", json={"title": "long"})).json()
    seed_long_words(api, session["id"])
    gui = await gui_factory(api, viewport=viewport)
    page = gui.page
    await page.wait_for_selector("#messages [data-id='long-2']")
    # Everything a reader can unfold: the thinking, the hits.
    for summary in await page.locator("#messages details summary").all():
        await summary.click()
    assert await page.locator("#messages .hit-paths").is_visible()
    assert await page.evaluate(TOO_WIDE) == {"sideways": 0, "wide": []}
    # Only long words wrap: the speakers' names stay whole, one line each ("steelframe").
    lines = await page.evaluate(
        """() => [...document.querySelectorAll('#messages .who')].map(el => {
             const text = document.createRange();
             text.selectNodeContents(el);
             return text.getClientRects().length;
           })"""
    )
    assert lines == [1, 1]
