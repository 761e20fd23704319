"""Review pickups and CI fix runs in the web GUI, as an operator watches them: a writer's
review comments and a review run say "#N: answering 2 review threads" (one notification,
in the task's place), a failing check says "#N: CI failed on abc1234, fix run 1 of 2" on the
card and in a notification, and the run modal lists the CI history (the failing commit,
the check, the fix run and the commit it pushed) live. Real RQ workers (in process), the
GitHub sandbox's CI control routes, Debian's Chromium."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import Gui, GuiFactory
from tests.browser.faster_pauses import FASTER_PAUSES
from tests.browser.test_gui_layout import OVERFLOW
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.test_lifecycle_ci_fix import fail_head

# Every notification text and every card "now" line the page ever showed, in order: the
# review's line lasts only while its run does, which the test cannot time.
RECORD = """
window.__seen = [];
new MutationObserver(() => {
  for (const el of document.querySelectorAll('#toasts .toast-text, .card-now')) {
    const line = `${el.className}|${el.textContent}`;
    if (!window.__seen.includes(line)) window.__seen.push(line);
  }
}).observe(document, { childList: true, subtree: true, characterData: true });
"""


async def _comment(lc: Lifecycle, number: int, body: str) -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    return await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments",
        {"body": body, "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1},
    )


async def _seen(gui: Gui, wanted: str) -> list[str]:
    await gui.page.wait_for_function(
        "w => window.__seen.some((line) => line.includes(w))", arg=wanted
    )
    return list(await gui.page.evaluate("window.__seen"))


async def _text(gui: Gui, selector: str, wanted: str) -> str:
    await gui.page.wait_for_function(
        "([s, w]) => (document.querySelector(s)?.innerText ?? '').includes(w)",
        arg=[selector, wanted],
    )
    return str(await gui.page.inner_text(selector))


async def test_review_pickups_and_fix_runs_show_live(make: Make, gui_factory: GuiFactory) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc, "Make the widget blue")
    task = lc.task(issue)
    gui = await gui_factory(lc.api, sign_in=False)
    await gui.page.add_init_script(RECORD)
    await gui.sign_in()
    await gui.page.wait_for_selector("body[data-live=stream]")
    await gui.screen("board")
    card = f".card[data-issue='{issue}']"
    await gui.page.locator(card).wait_for()

    # Two review comments, one review run: one notification naming both threads.
    await _comment(lc, number, "Too loud.")
    await _comment(lc, number, "Typo in the title.")
    await lc.work()
    seen = await _seen(gui, f"#{issue}: answering 2 review threads")
    assert "card-now|answering 2 review threads" in seen
    assert sum("answering" in line and "toast" in line for line in seen) == 1
    # The run ended (delivered): the card's line is gone, the task's notification says so.
    await _text(gui, f"{card} .badge", "delivered")
    assert await gui.page.locator(f"{card} .card-now").count() == 0

    # CI fails on the head: the card and a notification say it before the run starts.
    failed = await fail_head(lc, number)
    words = f"CI failed on {failed[:7]}, fix run 1 of 2"
    assert await _text(gui, f"{card} .card-now", words) == words
    toast = gui.page.locator("#toasts .toast", has_text=f"#{issue}: {words}")
    await toast.wait_for()
    assert await toast.locator("a").get_attribute("href") == task.pr_url
    # One notification per task: the fix run's replaced the earlier ones about #issue.
    assert await gui.page.locator(f"#toasts .toast[data-group='task:{task.id}']").count() == 1
    assert await gui.page.evaluate(OVERFLOW) <= 0

    # The run modal: the CI history while the fix run waits, then its commit, live.
    await gui.page.click(f"{card} .card-open")
    row = gui.page.locator(f"#run-body .ci-fix[data-sha='{failed}']")
    await row.wait_for()
    shown = await row.inner_text()
    assert f"CI failed on {failed[:7]} (tests)" in shown and "fix run 1 of 2" in shown
    assert "fix run under way" in shown
    assert (await row.locator("a").first.get_attribute("href") or "").endswith(f"/commit/{failed}")
    await lc.work()
    shown = await _text(gui, f"#run-body .ci-fix[data-sha='{failed}']", "fixed in")
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    assert head != failed and head[:7] in shown
    fixed = row.locator("a", has_text=head[:7])
    assert (await fixed.get_attribute("href") or "").endswith(f"/commit/{head}")
    violations = await gui.axe()
    assert violations == [], violations
    await gui.screenshot("loop-news-modal")
    assert [e for e in gui.console_errors if "401" not in e] == []


# Every notification the page added, in order (a repeat of one would show here twice).
ADDED_TOASTS = """
window.__toasts = [];
new MutationObserver((records) => {
  for (const r of records) for (const n of r.addedNodes)
    if (n.parentElement?.id === 'toasts') window.__toasts.push(n.textContent);
}).observe(document, { childList: true, subtree: true });
"""


async def _polls(gui: Gui, count: int) -> None:
    """Wait for `count` more polls of the Board."""
    for _ in range(count):
        async with gui.page.expect_response(lambda r: "/api/operator/board?limit" in r.url):
            pass


async def test_without_the_events_stream_polls_tell_the_same_news(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc, "Make the widget blue")
    task = lc.task(issue)
    gui = await gui_factory(lc.api, sign_in=False)
    # A service (or a proxy) without the events stream: the page polls the Board instead.
    await gui.page.route("**/api/operator/events", lambda route: route.fulfill(status=404))
    # The polls every 0.2 s, not 4 s (tests/browser/faster_pauses.py): the same news.
    await gui.page.add_init_script(RECORD + ADDED_TOASTS + FASTER_PAUSES)
    await gui.sign_in()
    await gui.page.wait_for_selector("body[data-live=poll]")
    await gui.screen("board")
    card = f".card[data-issue='{issue}']"
    await gui.page.locator(card).wait_for()

    # The review run took both threads up and ended between two polls: one notification.
    await _comment(lc, number, "Too loud.")
    await _comment(lc, number, "Typo in the title.")
    await lc.work()
    await _seen(gui, f"#{issue}: answering 2 review threads")
    board = await (await lc.api.get("/api/operator/board")).json()
    ledger = next(t for t in board["tasks"] if t["issue"] == issue)["review"]["summary"]
    assert "2" in ledger  # both threads, in whatever state the run left them
    await _text(gui, f"{card} .ledger-summary", ledger)  # the card's ledger, from the Board

    # CI fails on the head: the card (the fix run waits) and a notification with its link.
    failed = await fail_head(lc, number)
    words = f"CI failed on {failed[:7]}, fix run 1 of 2"
    toast = gui.page.locator("#toasts .toast", has_text=f"#{issue}: {words}")
    await toast.wait_for()
    assert await toast.locator("a").get_attribute("href") == task.pr_url
    assert await _text(gui, f"{card} .card-now", words) == words

    # Later polls see the same events again and tell none of them twice.
    await _polls(gui, 2)
    told = list(await gui.page.evaluate("window.__toasts"))
    assert sum("answering 2 review threads" in t for t in told) == 1, told
    assert sum(words in t for t in told) == 1, told
    assert [e for e in gui.console_errors if "401" not in e and "404" not in e] == []
