"""Without the events stream the page polls the Board, whose list carries what a card shows
(state, pull request state, review ledger counts, question): a card that moved with no new
task event (a review comment deleted before a run took it up: its thread declined on the
ledger) is updated from the list alone, with no request for the task itself (GET
/api/operator/tasks/{id}), as Playwright's request log shows. (The polls once read the task
of every moved card with a pull request, one request per task per poll.)"""

from __future__ import annotations

from github_sandbox.operations import HookEvent
from tests.browser.conftest import GuiFactory
from tests.browser.faster_pauses import FASTER_PAUSES
from tests.browser.test_gui_board_reads import task_reads
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull


async def test_a_polled_card_whose_ledger_moved_is_not_read_again(
    make: Make, gui_factory: GuiFactory
) -> None:
    lc = await make(coding_command=command("review"))
    issue, number = await delivered_pull(lc, "Make the widget blue")
    # A reviewer's comment (its pickup is a task event), before the page opens.
    pull = await lc.github.get_pull(lc.repo, number)
    comment = {"body": "Too loud.", "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1}
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", comment)
    gui = await gui_factory(lc.api, sign_in=False)
    # A service (or a proxy) without the events stream: the page polls the Board instead.
    await gui.page.route("**/api/operator/events", lambda route: route.fulfill(status=404))
    await gui.page.add_init_script(FASTER_PAUSES)  # a poll every 0.2 s
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
    # The poll that showed it has ended once the next one asks for the Board (polls never
    # overlap): any read of the task it made is in the log by then.
    async with gui.page.expect_response(lambda r: "/api/operator/board?limit" in r.url):
        pass
    assert reads == [], f"the poll read the task for what the Board's list carries: {reads}"
    assert [e for e in gui.console_errors if "401" not in e and "404" not in e] == []


async def _ledger(lc: Lifecycle, issue: int) -> str:
    """The task's review ledger in words, as the Board's list has it."""
    board = await (await lc.api.get("/api/operator/board")).json()
    return str(next(t for t in board["tasks"] if t["issue"] == issue)["review"]["summary"])
