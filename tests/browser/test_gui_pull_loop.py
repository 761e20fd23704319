"""The pull request loop in the web GUI, as an operator watches it: the Board card shows the
pull request's state, the review ledger ("2 open", then "1 open · 1 addressed") and "ready
for review", live from the events stream; the run modal (opened from the keyboard) lists
every thread with its state, commit link or reason; a merge ends the loop with a
notification linking the pull request, a final card, the outcome in the modal and the
Dashboard's counts. A reviewer's hostile text stays inert; axe finds nothing serious, light
and dark. Real RQ workers, the GitHub sandbox, Debian's Chromium."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import TimeoutError as PlaywrightTimeout

from bot.lifecycle.models import ThreadKind, ThreadState
from bot.lifecycle.thread_answers import ThreadAnswer, answer_threads
from tests.browser.conftest import Gui, GuiFactory
from tests.browser.test_gui_layout import OVERFLOW
from tests.browser.test_gui_xss import HOSTILE, WATCH, assert_inert
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull


async def _comment(lc: Lifecycle, number: int, body: str) -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    return await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments",
        {"body": body, "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1},
    )


async def _text(gui: Gui, selector: str, wanted: str) -> str:
    """The element's text once it contains `wanted` (events arrive when they arrive)."""
    try:
        await gui.page.wait_for_function(
            "([s, w]) => (document.querySelector(s)?.innerText ?? '').includes(w)",
            arg=[selector, wanted],
        )
    except PlaywrightTimeout:
        shown = await gui.page.inner_text(selector)
        raise AssertionError(f"{selector} never said {wanted!r}; it says {shown!r}") from None
    return str(await gui.page.inner_text(selector))


async def _no_axe_findings(gui: Gui, where: str) -> None:
    violations = await gui.axe()
    assert violations == [], f"{where}: {violations}"


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_board_follows_a_review_to_the_merge(
    make: Make, gui_factory: GuiFactory, scheme: str
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc, "Make the widget blue")
    task_id = lc.task(issue).id
    gui = await gui_factory(lc.api, sign_in=False, color_scheme=scheme)
    await gui.page.add_init_script(WATCH)
    await gui.sign_in()
    await gui.page.wait_for_selector("body[data-live=stream]")  # no event can be missed now
    await gui.screen("board")
    card = f".card[data-issue='{issue}']"
    shown = await _text(gui, f"{card} .card-pull", "ready for review")
    assert "PR open" in shown
    pr_link = gui.page.locator(f"{card} .pr-state")
    assert await pr_link.get_attribute("href") == lc.task(issue).pr_url

    # Reviews arrive while the Board is open: the card follows without a reload.
    loud = await _comment(lc, number, f"Too loud. {HOSTILE}")
    await _comment(lc, number, "Typo in the title.")
    shown = await _text(gui, f"{card} .card-pull", "2 open")
    assert "ready for review" not in shown
    fixed = next(
        t
        for t in (await (await lc.api.get(f"/api/operator/tasks/{task_id}")).json())[
            "review_threads"
        ]
        if t["root_id"] != loud["id"]
    )
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    answer = ThreadAnswer(ThreadKind.COMMENT, fixed["root_id"], ThreadState.ADDRESSED, "Ok.", head)
    assert await answer_threads(lc.ctx.db, lc.github, task_id, [answer]) == 1
    await lc.settle()
    await _text(gui, f"{card} .card-pull", "1 open · 1 addressed")
    await assert_inert(gui, "board with a hostile review")
    await gui.screenshot(f"pull-loop-board-{scheme}")
    await _no_axe_findings(gui, "board with the ledger")

    # The run modal from the keyboard: the whole ledger, the reviewer's text as text.
    await gui.page.focus(f"{card} .card-open")
    await gui.page.keyboard.press("Enter")
    await gui.page.locator("#run-modal").wait_for(state="visible")
    ledger = gui.page.locator("#run-body .ledger")
    await ledger.wait_for()
    open_row = ledger.locator(f".thread[data-thread='{loud['id']}']")
    assert (await open_row.locator(".thread-state").inner_text()) == "open"
    assert "<img src=x" in await open_row.locator(".thread-excerpt").inner_text()
    assert "@maintainer" in await open_row.inner_text()
    done_row = ledger.locator(f".thread[data-thread='{fixed['root_id']}']")
    assert (await done_row.locator(".thread-state").inner_text()) == "addressed"
    commit = done_row.locator("a", has_text=head[:7])
    assert (await commit.get_attribute("href") or "").endswith(f"/commit/{head}")
    head_line = await gui.page.inner_text("#run-body .ledger-head")
    assert head_line == "PR open · 1 open · 1 addressed · not ready for review"
    await assert_inert(gui, "run modal with a hostile review")
    await gui.screenshot(f"pull-loop-modal-{scheme}")
    await _no_axe_findings(gui, "run modal with the ledger")

    # The review run the comments queued answers the thread still open and delivers the
    # task again: ready for review, in the modal and on the card.
    await lc.work()
    await lc.settle()
    ready = "PR open · 2 addressed · ready for review"
    assert await _text(gui, "#run-body .ledger-head", ready) == ready
    assert (await open_row.locator(".thread-state").inner_text()) == "addressed"
    assert "ready for review" in await _text(gui, f"{card} .card-pull", "ready for review")

    # Merged while the modal is open: it shows the outcome; a notification links the PR.
    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    outcome = await _text(gui, "#run-body .outcome", "Merged")
    assert f"pull request #{number} merged by maintainer" in outcome and "final" in outcome
    toast = gui.page.locator("#toasts .toast", has_text="was merged")
    await toast.wait_for()
    assert await toast.locator("a").get_attribute("href") == lc.task(issue).pr_url
    await gui.page.keyboard.press("Escape")
    await gui.page.locator(f".column.state-merged {card}.final").wait_for()
    final = await gui.page.inner_text(f"{card} .card-pull")
    assert "merged" in final and "ready for review" not in final  # nothing is left to review

    await gui.screen("dashboard")
    counts = await _text(gui, "#dash-outcomes", "1 merged")
    assert "0 open" in counts and "0 closed" in counts
    assert await gui.page.locator("#dash-delivered .row.final", has_text=f"#{issue}").count() == 1
    await _no_axe_findings(gui, "dashboard with a merge")
    # The one 401 is the page asking whether it was signed in, before the sign-in.
    assert [e for e in gui.console_errors if "401" not in e] == []


async def test_a_closed_pull_request_on_a_phone(make: Make, gui_factory: GuiFactory) -> None:
    """Closed without a merge, at 390x844: the card in the Closed column reads final, the
    modal says how it ended with a long hostile review in it, and nothing overflows."""
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc, "Make the widget blue " + "and wide " * 12)
    await _comment(lc, number, "x" * 400 + f" {HOSTILE}")
    await as_person(lc, "maintainer", "PATCH", f"/pulls/{number}", {"state": "closed"})
    gui = await gui_factory(lc.api, sign_in=False, viewport={"width": 390, "height": 844})
    await gui.page.add_init_script(WATCH)
    await gui.sign_in()
    await gui.screen("board")
    card = f".column.state-closed .card.final[data-issue='{issue}']"
    await gui.page.locator(card).wait_for()
    assert "closed" in await gui.page.inner_text(f"{card} .card-pull")
    assert await gui.page.evaluate(OVERFLOW) <= 0, "the Board"
    await _no_axe_findings(gui, "the Board on a phone")
    await gui.page.click(f"{card} .card-open")
    outcome = await _text(gui, "#run-body .outcome", "Closed without a merge")
    assert f"pull request #{number} closed without a merge by maintainer" in outcome
    assert "1 open" in await gui.page.inner_text("#run-body .ledger-head")
    assert await gui.page.evaluate(OVERFLOW) <= 0, "the run modal"
    await _no_axe_findings(gui, "the run modal on a phone")
    await assert_inert(gui, "the run modal on a phone")
    await gui.page.keyboard.press("Escape")
    await gui.screen("dashboard")
    assert "1 closed" in await _text(gui, "#dash-outcomes", "1 closed")
    assert await gui.page.evaluate(OVERFLOW) <= 0, "the Dashboard"


async def test_a_card_delivered_live_shows_its_pull_request_state(
    make: Make, gui_factory: GuiFactory
) -> None:
    """A `task` event carries the pull request's state and ledger with its link: a card
    delivered while the Board is open reads as a reload shows it ("PR open", "ready for
    review"), not as a bare "PR" link."""
    lc = await make(coding_command=command("review"))
    gui = await gui_factory(lc.api)
    await gui.page.wait_for_selector("body[data-live=stream]")  # no event can be missed now
    await gui.screen("board")
    issue, _ = await delivered_pull(lc, "Make the widget blue")
    card = f".column[data-state='delivered'] .card[data-issue='{issue}']"
    await gui.page.locator(card).wait_for()
    shown = await _text(gui, f"{card} .card-pull", "ready for review")
    assert "PR open" in shown
    pr_link = gui.page.locator(f"{card} .pr-state")
    assert await pr_link.get_attribute("href") == lc.task(issue).pr_url
    # The Dashboard, rendered from the same cards, agrees.
    await gui.screen("dashboard")
    assert "ready for review" in await _text(gui, "#dash-delivered", "ready for review")
