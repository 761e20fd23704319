"""The sandbox's pull request page in a real browser: a person leaves a review comment on a
file line and marks a check failed with the page's forms, and sees both on the page."""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import AXE, WAIT_MS
from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import branch_with_file


async def test_review_comment_and_failed_check_from_the_browser(
    browser: Any, github_sandbox: GitHubSandbox
) -> None:
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    branch_with_file(repo.git_path, "steelframe/notes", "notes.md", "one\ntwo\nthree\n")
    pull = await github_sandbox.client().create_pull(
        SANDBOX_REPO, title="Notes", head="steelframe/notes", base="main", body=""
    )
    page = await browser.new_page()
    await page.goto(pull.html_url)
    form = "#review-form"
    await page.select_option(f"{form} select[name=path]", "notes.md")
    await page.fill(f"{form} input[name=line]", "2")
    await page.fill(f"{form} textarea[name=body]", "Say why.")
    await page.click(f"{form} button[type=submit]")
    await page.wait_for_selector(".thread >> text=Say why.", timeout=WAIT_MS)
    assert "notes.md" in await page.inner_text(".thread .meta")
    form = "#fail-check-form"
    await page.fill(f"{form} input[name=name]", "unit")
    await page.fill(f"{form} input[name=message]", "test_two failed")
    await page.click(f"{form} button[type=submit]")
    await page.wait_for_selector("li.check.failure >> text=unit: failure", timeout=WAIT_MS)
    await page.evaluate(AXE.read_text() + "\n;0")
    serious = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => ['serious','critical'].includes(v.impact)).map(v => v.id)"
    )
    assert serious == []
    await github_sandbox.settle()
    events = {(d.event, d.action) for d in github_sandbox.sandbox.hooks.sent}
    assert {("pull_request_review", "submitted"), ("check_run", "completed")} <= events
