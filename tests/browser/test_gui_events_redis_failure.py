"""The web GUI through a Redis outage: the events stream, refused with a 503 while Redis is
away (EventSource gives up for good on that), is tried again with a growing pause while the
page polls the Board, and once it opens again, events show live as before.

A Redis of the test's own goes away and comes back with its data (tests/fakes/own_redis.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.conftest import make_settings
from tests.fakes.lifecycle import wait_for
from tests.fakes.own_redis import OwnRedis
from tests.fakes.own_redis import own_redis_fixture as own_redis_fixture  # `own_redis`

EVENTS = "/api/operator/events"
# Whether the line under the header ever said the service cannot be reached.
WATCH_CONNECTION_LINE = """() => {
  const line = document.querySelector('#connection');
  new MutationObserver(() => {
    if (line.textContent) window.sawConnectionLine = true;
  }).observe(line, {childList: true, characterData: true, subtree: true});
}"""


def refusals(gui: Gui) -> int:
    """The events stream's requests the service answered 503."""
    return sum(
        f.startswith(f"GET {gui.base}{EVENTS}") and f.endswith(" 503") for f in gui.failed_requests
    )


async def test_the_gui_reopens_the_events_stream_after_a_503(
    api_factory: Any, gui_factory: GuiFactory, tmp_path: Path, own_redis: OwnRedis
) -> None:
    api = await api_factory(make_settings(tmp_path, redis_url=own_redis.url))
    gui = await gui_factory(api)
    page = gui.page
    await page.wait_for_selector("body[data-live=stream]", timeout=WAIT_MS)
    # The service answers (its own 503, in its error JSON): never "connection lost".
    await page.evaluate(WATCH_CONNECTION_LINE)

    own_redis.stop_keeping_data()  # the stream ends; the browser's re-open is answered 503
    await page.wait_for_selector("body[data-live=poll]", timeout=WAIT_MS)
    # Both the browser's re-open and the page's probe of it: answered 503 by the service.
    await wait_for(lambda: refusals(gui) >= 2, within=WAIT_MS / 1000)

    own_redis.start()
    # Made while the page may still be polling (polling does not list sessions): the
    # re-opened stream brings it, or the reload on re-opening does.
    early = await (await api.post("/api/operator/chat/new", json={"title": "meanwhile"})).json()
    await page.wait_for_selector("body[data-live=stream]", timeout=WAIT_MS)
    made = await (await api.post("/api/operator/chat/new", json={"title": "after Redis"})).json()
    for session in (early, made):
        await page.wait_for_selector(f"#session-list [data-session='{session['id']}']")
    assert await page.evaluate("() => window.sawConnectionLine") is None
