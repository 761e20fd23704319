"""The whole operator loop in Chromium against the real service and the GitHub sandbox:
sign in, ask (status, thinking, hits), file, watch the card, Discuss, Decision, edit,
publish, see the marker comment, and the waiting task resume and deliver."""

from __future__ import annotations

import re

from bot.lifecycle.states import TaskState
from tests.browser.conftest import WAIT_MS, Gui, GuiFactory
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

# Every record is kept even when several frames land in one task: the status line's
# replaced text nodes, and the class changes of the Thinking label (old values included).
WATCH = """() => {
  window.__seen = {status: [], shimmer: false};
  new MutationObserver(records => {
    for (const r of records) for (const n of r.addedNodes) window.__seen.status.push(n.textContent);
  }).observe(document.querySelector('#status-line'), {childList: true});
  new MutationObserver(records => {
    for (const r of records)
      if ((r.oldValue || '').includes('shimmer') || r.target.classList.contains('shimmer'))
        window.__seen.shimmer = true;
  }).observe(document.querySelector('#messages'), {subtree: true, attributes: true,
             attributeOldValue: true, attributeFilter: ['class']});
}"""


# Every toast shown, kept in sessionStorage so a reload does not forget the earlier ones.
TOASTS = """
(() => {
  const watch = () => new MutationObserver(records => {
    const seen = JSON.parse(sessionStorage.getItem('toasts') || '[]');
    for (const r of records) for (const n of r.addedNodes) seen.push(n.textContent);
    sessionStorage.setItem('toasts', JSON.stringify(seen));
  }).observe(document.querySelector('#toasts'), {childList: true});
  if (document.querySelector('#toasts')) watch();
  else window.addEventListener('DOMContentLoaded', watch);
})()
"""


async def card_state(gui: Gui, issue: int) -> str | None:
    state: str | None = await gui.page.evaluate(
        "(n) => document.querySelector(`.card[data-issue='${n}']`)"
        "?.closest('.column')?.dataset.state ?? null",
        issue,
    )
    return state


async def wait_card(gui: Gui, issue: int, state: str) -> None:
    await gui.page.wait_for_function(
        "([n, s]) => document.querySelector(`.column[data-state='${s}'] .card[data-issue='${n}']`)",
        arg=[issue, state],
        timeout=WAIT_MS,
    )


async def ask_with_hits(gui: Gui) -> None:
    await gui.page.evaluate(WATCH)
    await gui.send("Why does the export job fail on Mondays?")
    await gui.wait_done()
    seen = await gui.page.evaluate("() => window.__seen")
    assert any(re.match(r"retrieve \d/3 · \d+ hits", s) for s in seen["status"]), seen
    assert seen["shimmer"], "the in-flight Thinking label never shimmered"
    reply = gui.page.locator("#messages .msg.assistant").last
    thinking = reply.locator("details.thinking")
    assert await thinking.get_attribute("open") is None  # collapsed after the reply started
    assert re.match(
        r"Thought for (under )?[\d.]+ s", await thinking.locator("summary").inner_text()
    )
    assert "Looking at" in await thinking.locator(".thinking-body").text_content()
    hits = reply.locator("details.hits")
    assert re.match(r"retrieve \d+ hits?", await hits.locator("summary").inner_text())
    await hits.locator("summary").click()
    assert "fx rate table" in await hits.locator(".hit-preview").first.inner_text()


async def file_and_watch(gui: Gui, lc: Lifecycle) -> int:
    await gui.send("file an issue for Add a cache to the export job")
    await gui.wait_done()
    reply = await gui.page.locator("#messages .msg.assistant").last.inner_text()
    assert reply.count("Filed as #") == 1, reply  # said once, by the reply itself
    number = int(re.search(r"Filed as #(\d+)", reply)[1])  # type: ignore[index]
    assert lc.task(number).state == TaskState.QUEUED
    issue = lc.sandbox.sandbox.world.repo(lc.repo).issues[number]  # type: ignore[union-attr]
    assert "steelframe:from-gui" in issue.labels  # labelled by the client that filed it
    await gui.screen("board")
    await wait_card(gui, number, "queued")
    await gui.screenshot("board")
    await lc.settle()  # the filed issue's webhooks, then its job
    await lc.work()
    assert lc.task(number).state == TaskState.WAITING_FOR_INFO
    await wait_card(gui, number, "waiting_for_info")  # moved live, no reload
    return number


async def discuss_and_draft(gui: Gui, issue: int) -> None:
    await gui.page.click(f".card[data-issue='{issue}'] button.discuss")
    await gui.page.wait_for_selector("#screen-chat:not([hidden])")
    assert await gui.page.inner_text("#chat-title") == f"Discuss #{issue}"
    assert await gui.page.inner_text("#focus-text") == f"focus: #{issue}"
    assert await gui.page.input_value("#message") == ""  # the operator speaks first
    assert await gui.page.locator("#messages .msg").count() == 0
    sidebar = gui.page.locator("#session-list .session-title", has_text=f"Discuss #{issue}")
    await sidebar.wait_for()
    await gui.send("draft a decision: Use Redis.")
    await gui.wait_done()
    bar = gui.page.locator("#publish-bar")
    await bar.wait_for(state="visible")
    assert await gui.page.inner_text("#publish") == f"Publish to #{issue}"
    assert await gui.page.input_value("#decision-text") == "Use Redis."
    # The draft survives the next turn and comes back when the session is reopened.
    await gui.send("thanks, one more thought")
    await gui.wait_done()
    assert await bar.is_visible()
    await gui.page.reload()
    await gui.page.wait_for_selector("#publish-bar:not([hidden])", timeout=WAIT_MS)
    assert await gui.page.input_value("#decision-text") == "Use Redis."
    await gui.screenshot("chat-decision")
    # Citations are clickable: `#N` of a known run opens its run modal.
    cite = gui.page.locator("#messages .msg.assistant .cite", has_text=f"#{issue}").first
    await cite.click()
    await gui.page.locator("#run-modal").wait_for(state="visible")
    assert f"#{issue}" in await gui.page.inner_text("#run-title")
    await gui.page.click("#run-close")


async def publish(gui: Gui, lc: Lifecycle, issue: int) -> None:
    edited = "Use Redis, with a five minute expiry."
    await gui.page.fill("#decision-text", edited)
    await gui.page.click("#publish")
    await gui.page.wait_for_selector("#publish-bar", state="hidden", timeout=WAIT_MS)
    comments = await lc.comments(issue)
    marked = [c["body"] for c in comments if c["body"].startswith(DECISION)]
    assert len(marked) == 1 and edited in marked[0]
    await lc.settle()
    task = lc.task(issue)
    assert task.state == TaskState.RUNNING and task.pending_decision == edited
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    answer = lc.branch_file("ANSWER.md", f"steelframe/issue-{issue}")
    assert answer is not None and f"decision: {edited}" in answer


async def test_the_whole_loop_in_the_browser(make: Make, gui_factory: GuiFactory) -> None:
    lc = await make(coding_command=command("question"))
    await lc.open_issue(
        "Export job fails on Mondays",
        "The export job reads the fx rate table before it is refreshed on Mondays.",
        pickup=False,
    )
    gui = await gui_factory(lc.api)
    await gui.page.add_init_script(TOASTS)
    await gui.page.evaluate(TOASTS)
    await gui.screenshot("signed-in")
    await ask_with_hits(gui)
    await gui.screenshot("chat")
    issue = await file_and_watch(gui, lc)
    await discuss_and_draft(gui, issue)
    await publish(gui, lc, issue)
    await gui.screen("board")
    await wait_card(gui, issue, "delivered")
    card = gui.page.locator(f".card[data-issue='{issue}']")
    assert await card.locator(".cost").inner_text() == "$0.42"  # what the runtime reported
    await gui.page.click(f".card[data-issue='{issue}'] .card-open")
    modal = gui.page.locator("#run-modal")
    await modal.wait_for(state="visible")
    assert "waiting_for_info" in await modal.locator(".events").inner_text()
    assert await modal.locator("#run-actions button", has_text="Terminate").count() == 0
    await gui.screenshot("run-modal")
    await gui.page.click("#run-close")
    await gui.screen("dashboard")
    row = gui.page.locator("#dash-delivered .row-focus", has_text=f"#{issue}")
    await row.wait_for()
    await gui.screenshot("dashboard")
    await row.click()
    await gui.page.wait_for_selector("#screen-chat:not([hidden])")
    assert await gui.page.inner_text("#focus-text") == f"focus: #{issue}"
    # A cited session id opens that session.
    await gui.page.locator("#messages .cite[title='Open this session']").first.click()
    await gui.page.wait_for_function(
        "() => document.querySelector('#chat-title').textContent.startsWith('Why does')"
    )
    # Each change was announced where the operator was, exactly once (polls repeat the
    # same states; a reconnecting stream could too).
    toasts = await gui.page.evaluate("() => JSON.parse(sessionStorage.getItem('toasts'))")
    assert sum("is waiting for you" in t for t in toasts) == 1, toasts
    assert sum(t.startswith(f"#{issue}") and "delivered" in t for t in toasts) == 1, toasts
    assert not page_errors(gui)


def page_errors(gui: Gui) -> list[str]:
    """Script errors (resource 4xx the page expects, like the sign-in probe, are not)."""
    return [e for e in gui.console_errors if not e.startswith("Failed to load resource")]
