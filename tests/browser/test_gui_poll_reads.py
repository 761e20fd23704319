"""Without the events stream the page polls the Board, whose list carries what a card shows
(state, pull request state, review ledger counts, question) and the news the stream would
have told (each task's latest review pickup and fix run): a card that moved with no new
task event (a review comment deleted before a run took it up: its thread declined on the
ledger) is updated from the list alone, and so are a review pickup's notification ("#N:
answering 1 review thread") and a fix run's ("#N: CI failed on abc1234, fix run 1 of 2"),
with no request for the task itself (GET /api/operator/tasks/{id}), as Playwright's request
log shows. (The polls once read the task of every moved card with a pull request, then of
every card with a new event: one request per task per poll.)"""

from __future__ import annotations

from github_sandbox.operations import HookEvent
from tests.browser.conftest import Gui, GuiFactory
from tests.browser.faster_pauses import FASTER_PAUSES
from tests.browser.test_gui_board_reads import task_reads
from tests.browser.test_gui_loop_news import ADDED_TOASTS
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.test_lifecycle_ci_fix import fail_head


async def test_polls_tell_ledgers_review_pickups_and_fix_runs_without_reading_the_task(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("review", "fix"))
    issue, number = await delivered_pull(lc, "Make the widget blue")
    # A reviewer's comment (its pickup is a task event), before the page opens.
    pull = await lc.github.get_pull(lc.repo, number)
    comment = {"body": "Too loud.", "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1}
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", comment)
    gui = await gui_factory(lc.api, sign_in=False)
    # A service (or a proxy) without the events stream: the page polls the Board instead.
    await gui.page.route("**/api/operator/events", lambda route: route.fulfill(status=404))
    # A poll every 0.2 s; every notification the page adds is recorded (a later one about the
    # task replaces it on screen).
    await gui.page.add_init_script(FASTER_PAUSES + ADDED_TOASTS)
    await gui.sign_in()
    await gui.page.wait_for_selector("body[data-live=poll]")
    await gui.screen("board")
    card = gui.page.locator(f".card[data-issue='{issue}']")
    await card.locator(".ledger-summary", has_text=await _ledger(lc, issue)).wait_for()
    reads = task_reads(gui)

    # The reviewer deletes the comment before a run took it up: its thread is declined on
    # the ledger, and the task records no event.
    created = [
        d
        for d in lc.sandbox.sandbox.hooks.sent
        if d.event == "pull_request_review_comment" and d.action == "created"
    ]
    deleted = {**created[-1].payload, "action": "deleted"}
    lc.sandbox.sandbox.hooks.enqueue([HookEvent("pull_request_review_comment", deleted)])
    await lc.settle()
    summary = await _ledger(lc, issue)
    assert "declined" in summary, summary
    await card.locator(".ledger-summary", has_text=summary).wait_for()
    await _next_poll(gui)
    assert reads == [], f"the poll read the task for what the Board's list carries: {reads}"

    # Another comment, and a review run takes it up: its notification, from the Board's list.
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", comment)
    await lc.work()
    await _told(gui, f"#{issue}: answering 1 review thread")
    # CI fails on the head: the fix run's notification, with its commit, from the list too.
    failed = await fail_head(lc, number)
    words = f"#{issue}: CI failed on {failed[:7]}, fix run 1 of 2"
    await _told(gui, words)
    await _next_poll(gui)
    assert reads == [], f"the polls read the task to word its news: {reads}"
    assert [e for e in gui.console_errors if "401" not in e and "404" not in e] == []


async def _told(gui: Gui, words: str) -> None:
    await gui.page.wait_for_function("w => window.__toasts.some((t) => t.includes(w))", arg=words)


async def _next_poll(gui: Gui) -> None:
    """The poll under way has ended once the next one asks for the Board (polls never
    overlap): any read of a task it made is in the request log by then."""
    async with gui.page.expect_response(lambda r: "/api/operator/board?limit" in r.url):
        pass


async def _ledger(lc: Lifecycle, issue: int) -> str:
    """The task's review ledger in words, as the Board's list has it."""
    board = await (await lc.api.get("/api/operator/board")).json()
    return str(next(t for t in board["tasks"] if t["issue"] == issue)["review"]["summary"])
