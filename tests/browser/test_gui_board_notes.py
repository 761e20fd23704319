"""What the Board says instead of cards ("No tasks yet", "The Board could not load") reads as
a line across the Board above its columns, not squeezed into a column's cell beside
"Queued" at a laptop's width or a phone's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import GuiFactory
from tests.browser.test_gui_layout import LAPTOP, PHONE
from tests.conftest import make_settings

ACROSS_AND_ABOVE = """(sel) => {
  const grid = document.querySelector('#board-columns').getBoundingClientRect();
  const note = document.querySelector(sel).getBoundingClientRect();
  const first = document.querySelector('#board-columns .column')?.getBoundingClientRect();
  return {across: Math.abs(note.width - grid.width) < 1,
          above: !first || note.bottom <= first.top};
}"""


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390x844", "1280x800"])
async def test_the_board_says_no_tasks_yet_across_it(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, viewport: dict[str, int]
) -> None:
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, viewport=viewport)
    await gui.screen("board")
    await gui.page.wait_for_selector("#board-columns .empty")
    placed = await gui.page.evaluate(ACROSS_AND_ABOVE, "#board-columns .empty")
    assert placed == {"across": True, "above": True}


async def test_the_board_says_it_could_not_load_across_it(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory
) -> None:
    api = await api_factory(make_settings(tmp_path))
    gui = await gui_factory(api, sign_in=False)

    async def refuse(route: Any) -> None:
        await route.fulfill(status=503, content_type="application/json", body='{"error": "down"}')

    await gui.page.route("**/api/operator/board?*", refuse)
    await gui.sign_in()
    await gui.screen("board")
    await gui.page.wait_for_selector("#board-columns .load-failed")
    placed = await gui.page.evaluate(ACROSS_AND_ABOVE, "#board-columns .load-failed")
    assert placed == {"across": True, "above": True}
