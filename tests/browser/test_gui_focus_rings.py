"""Focus rings show whole: Tab through the Chat screen, and each control's ring (its outline
and offset) lies inside every box that clips it, at a phone's size and a laptop's: a ring
cut off by a scrolling list (the sidebar's sessions) reads as no focus at all on its
clipped side (gui brief: "visible focus rings")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.runtimes.offline import OfflineRuntime
from tests.browser.conftest import GuiFactory
from tests.browser.test_gui_layout import LAPTOP, PHONE
from tests.conftest import make_settings

# The focused control's ring, and each ancestor that clips it (overflow other than visible)
# with the sides it cuts: nothing when the ring shows whole.
RING_CLIPPED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  if (style.outlineStyle === 'none') return el.tagName + ' has no ring';
  const grow = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
  const r = el.getBoundingClientRect();
  const ring = {left: r.left - grow, top: r.top - grow,
                right: r.right + grow, bottom: r.bottom + grow};
  const cut = [];
  for (let box = el.parentElement; box; box = box.parentElement) {
    const s = getComputedStyle(box);
    if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
    const b = box.getBoundingClientRect();
    const inner = {left: b.left + box.clientLeft, top: b.top + box.clientTop,
                   right: b.left + box.clientLeft + box.clientWidth,
                   bottom: b.top + box.clientTop + box.clientHeight};
    // A ring scrolled out of its box is not shown at all: only one in view can be cut.
    if (r.bottom < inner.top || r.top > inner.bottom) continue;
    const sides = ['left', 'top', 'right', 'bottom'].filter(side =>
      side === 'left' || side === 'top'
        ? ring[side] < inner[side] - 0.5
        : ring[side] > inner[side] + 0.5);
    if (sides.length) cut.push((box.id || box.className) + ':' + sides.join('/'));
  }
  if (!cut.length) return null;
  const name = el.id || el.className || el.tagName;
  return name + ' ' + (el.textContent || '').trim().slice(0, 20) + ' cut by ' + cut.join(', ');
}"""


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390x844", "1280x800"])
async def test_every_focus_ring_on_the_chat_screen_shows_whole(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, viewport: dict[str, int]
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    for title in ("first", "second"):
        await api.post("/api/operator/chat/new", json={"title": title})
    gui = await gui_factory(api, viewport=viewport)
    page = gui.page
    await gui.send("what do you know about #12 and the login page?")
    await gui.wait_done()
    if viewport is PHONE:
        await page.click("#menu-toggle")  # the sessions are in the drawer
        await page.wait_for_selector("#sidebar", state="visible")
    await page.focus("#new-chat")
    clipped = set()
    for _ in range(30):
        await page.keyboard.press("Tab")  # from the keyboard: the ring shows (:focus-visible)
        problem = await page.evaluate(RING_CLIPPED)
        if problem:
            clipped.add(problem)
    assert clipped == set()


# How far the focused composer's ring reaches over the status line's words above it (> 0:
# the ring is drawn across them).
RING_OVER_STATUS = """() => {
  const box = document.querySelector('#message');
  const style = getComputedStyle(box);
  const grow = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
  const words = document.createRange();
  words.selectNodeContents(document.querySelector('#status-line'));
  return words.getBoundingClientRect().bottom - (box.getBoundingClientRect().top - grow);
}"""


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390x844", "1280x800"])
async def test_the_composer_ring_leaves_the_status_line_readable(
    api_factory: Any, tmp_path: Path, gui_factory: GuiFactory, viewport: dict[str, int]
) -> None:
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: OfflineRuntime())
    gui = await gui_factory(api, viewport=viewport)
    page = gui.page
    await gui.send("what changed in the export job?")
    await gui.wait_done()
    assert (await page.inner_text("#status-line")).startswith("done")
    await page.focus("#send")
    await page.keyboard.press("Shift+Tab")  # back to the composer from the keyboard
    assert await page.evaluate("() => document.activeElement.id") == "message"
    assert await page.evaluate(RING_OVER_STATUS) <= 0
