"""Untrusted text through every surface renders inert: model replies and thinking, the
operator's own message and session title, retrieved previews, proposed titles, issue titles
on Board cards, the run modal and the Dashboard. Nothing runs, and the sanitiser (not only
the CSP) is what stops it: no policy violation is even attempted."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from bot.runtimes.base import Thinking
from tests.browser.conftest import Gui, GuiFactory
from tests.conftest import GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.lifecycle import start_lifecycle
from tests.fakes.runtimes import ScriptedRuntime, reply

PAYLOADS = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "[click me](javascript:window.__pwned='link')",
    "<a href=\"javascript:window.__pwned='a'\">raw link</a>",
    "<svg onload=\"window.__pwned='svg'\"></svg>",
    "<iframe src=\"javascript:window.__pwned='iframe'\"></iframe>",
    "<details open ontoggle=\"window.__pwned='toggle'\">x</details>",
]
HOSTILE = " ".join(PAYLOADS)
TITLE = "<img src=x onerror=\"window.__pwned='title'\"> Export <b>bold</b>"
TRAILER = "STEELFRAME_META: " + json.dumps(
    {"intent": "propose_work", "title": "<script>window.__pwned='pending'</script>", "body": "x"}
)
# Chromium reports a policy check for inline handlers even while DOMPurify parses the text
# into an inert DOMParser document (where nothing can run, before it strips them): those are
# the sanitiser at work, not an attempt to run. Anything else is a finding.
WATCH = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => {
  if (!/\\/vendor\\/purify\\.es\\.mjs$/.test(e.sourceFile))
    window.__violations.push(e.violatedDirective + ' ' + e.sourceFile + ':' + e.lineNumber);
});
"""
INERT = """() => {
  const bad = [];
  for (const el of document.querySelectorAll('#app *, #toasts *')) {
    for (const attr of el.attributes) {
      if (attr.name.startsWith('on')) bad.push(el.tagName + ' ' + attr.name);
      if (/^\\s*javascript:/i.test(attr.value)) bad.push(el.tagName + ' ' + attr.name + ' js');
    }
    // The Dashboard's own spend chart (spend.js) is the one SVG the page draws; any other,
    // or anything with attributes beyond its drawing, is injected.
    const chart = el.closest('#dash-spend svg.spend-bars');
    const drawn = chart && (el === chart || el.tagName.toUpperCase() === 'RECT');
    if (['SCRIPT', 'IFRAME', 'SVG', 'OBJECT', 'EMBED'].includes(el.tagName.toUpperCase()) && !drawn)
      bad.push(el.tagName);
  }
  return {bad, pwned: window.__pwned ?? null, violations: window.__violations};
}"""


async def assert_inert(gui: Gui, where: str) -> None:
    state = await gui.page.evaluate(INERT)
    assert state == {"bad": [], "pwned": None, "violations": []}, where
    assert not [d for d in gui.dialogs if not d.startswith("confirm:")], where


async def test_hostile_text_renders_inert_everywhere(
    github_sandbox: GitHubSandbox,
    api_factory: Any,
    tmp_path: Path,
    redis_url: str,
    gui_factory: GuiFactory,
) -> None:
    runtime = ScriptedRuntime(
        [[Thinking(HOSTILE), *reply(f"Here you go: {HOSTILE}", trailer=TRAILER)]]
    )
    factory = functools.partial(api_factory, runtimes=lambda agent: runtime)
    lc = await start_lifecycle(
        github_sandbox, factory, tmp_path, redis_url, coding_command=command("question")
    )
    issue = await lc.open_issue(TITLE, f"The export breaks. {HOSTILE}")
    await lc.work()  # waiting for info: on the Board and the Dashboard
    gui = await gui_factory(lc.api, sign_in=False)
    await gui.page.add_init_script(WATCH)
    await gui.sign_in()

    await gui.send(f"Why does the export break? {PAYLOADS[1]}")
    await gui.wait_done()
    last = gui.page.locator("#messages .msg.assistant").last
    await last.locator("details.thinking summary").click()
    await last.locator("details.hits summary").click()
    preview = await last.locator(".hit-preview").first.inner_text()
    assert "<script>" in preview  # shown as text, not parsed
    assert "window.__pwned='pending'" in await gui.page.inner_text("#pending-slot")
    assert PAYLOADS[1] in await gui.page.locator("#messages .msg.user").last.inner_text()
    assert "<img src=x" in await gui.page.inner_text("#session-list")  # the title, cut at 60
    await assert_inert(gui, "chat")

    await gui.screen("board")
    card = gui.page.locator(f".card[data-issue='{issue}']")
    await card.wait_for()
    assert "<b>bold</b>" in await card.inner_text()
    await card.locator(".card-open").click()
    await gui.page.locator("#run-modal").wait_for(state="visible")
    assert "<img" in await gui.page.inner_text("#run-title")
    await assert_inert(gui, "run modal")
    await gui.page.click("#run-close")

    await gui.screen("dashboard")
    row = gui.page.locator("#dash-waiting .row", has_text="Export")
    await row.wait_for()
    assert "<b>bold</b>" in await row.inner_text()
    await assert_inert(gui, "dashboard")

    # Reopened from storage, the same text is just as inert (the reload stays on the
    # Dashboard, the chat reopened behind it).
    await gui.page.reload()
    await gui.page.wait_for_selector("#messages .msg.assistant", state="attached")
    await gui.screen("chat")
    await assert_inert(gui, "reopened chat")
