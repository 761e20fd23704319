"""The pull request page's forms in the sandbox: a person leaves a review comment on a file
line, marks a check failed and merges, from the browser; each sends GitHub's webhooks. A
post without the page's form token, or from another origin, changes nothing."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest

from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.test_sandbox_after_pr import branch_with_notes


@pytest.fixture
async def page(github_sandbox: GitHubSandbox) -> Any:
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    branch_with_notes(repo.git_path, "steelframe/notes")
    client = github_sandbox.client()
    pull = await client.create_pull(
        SANDBOX_REPO, title="Notes", head="steelframe/notes", base="main", body=""
    )
    async with aiohttp.ClientSession() as session:
        yield Page(github_sandbox, session, pull.html_url)


class Page:
    def __init__(self, sandbox: GitHubSandbox, session: aiohttp.ClientSession, url: str):
        self.sandbox = sandbox
        self.session = session
        self.url = url

    async def html(self) -> str:
        async with self.session.get(self.url) as response:
            assert response.status == 200
            return await response.text()

    async def token(self, form_id: str) -> str:
        html = await self.html()
        form = html[html.index(f'id="{form_id}"') :]
        found = re.search(r'name="token" value="([0-9a-f]+)"', form)
        assert found is not None
        return found.group(1)

    async def post(
        self, action: str, fields: dict[str, str], headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        origin = self.sandbox.url
        async with self.session.post(
            f"{self.url}/{action}",
            data=fields,
            headers={"Origin": origin, **(headers or {})},
            allow_redirects=False,
        ) as response:
            return response.status, response.headers.get("Location", "") or await response.text()


async def test_a_review_comment_on_a_file_line_from_the_page(
    github_sandbox: GitHubSandbox, page: Page
) -> None:
    html = await page.html()
    assert 'id="review-form"' in html and "<option>notes.md</option>" in html
    token = await page.token("review-form")
    fields = {"token": token, "login": "rita", "path": "notes.md", "line": "2"}
    status, location = await page.post(
        "reviews", {**fields, "event": "REQUEST_CHANGES", "body": "Say <b>why</b>."}
    )
    assert status == 303 and "#pullrequestreview-" in location
    await github_sandbox.settle()
    events = [(d.event, d.action) for d in github_sandbox.sandbox.hooks.sent]
    assert events.count(("pull_request_review", "submitted")) == 1
    assert events.count(("pull_request_review_comment", "created")) == 1
    review = next(d for d in github_sandbox.sandbox.hooks.sent if d.event == "pull_request_review")
    assert review.payload["review"]["state"] == "changes_requested"
    assert review.payload["sender"]["login"] == "rita"
    shown = await page.html()
    assert "Say &lt;b&gt;why&lt;/b&gt;." in shown and "<code>notes.md</code> line 2" in shown
    # A line the diff does not show is GitHub's 422; nothing is added.
    status, _ = await page.post("reviews", {**fields, "line": "40", "body": "x"})
    assert status == 422
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and len(repo.review_comments) == 1


async def test_mark_a_check_failed_from_the_page(github_sandbox: GitHubSandbox, page: Page) -> None:
    token = await page.token("fail-check-form")
    fields = {
        "token": token,
        "name": "unit",
        "path": "notes.md",
        "line": "1",
        "message": "test_first failed",
        "log": "FAILED test_first\r\n",
    }
    status, location = await page.post("checks", fields)
    assert status == 303 and location.endswith("#checks")
    assert "unit: failure · test_first failed" in await page.html()
    client = github_sandbox.client()
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None
    (job,) = repo.jobs.values()
    log = await client.download_job_log(SANDBOX_REPO, job.id)
    assert log.text == "FAILED test_first\n"
    annotations = await client.list_check_run_annotations(SANDBOX_REPO, job.check_run_id)
    assert [(a.path, a.start_line) for a in annotations] == [("notes.md", 1)]
    await github_sandbox.settle()
    events = {(d.event, d.action) for d in github_sandbox.sandbox.hooks.sent}
    assert {("check_run", "completed"), ("workflow_run", "completed")} <= events


async def test_merge_from_the_page(github_sandbox: GitHubSandbox, page: Page) -> None:
    status, _ = await page.post("merge", {"token": await page.token("merge-form")})
    assert status == 303
    html = await page.html()
    assert "Merged" in html and 'id="merge-form"' not in html


@pytest.mark.parametrize(
    "tamper",
    [
        {"token": "0" * 64},
        {"token": ""},
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"form": "merge"},  # another form's token
    ],
    ids=["wrong-token", "no-token", "other-origin", "cross-site", "token-of-another-form"],
)
async def test_a_post_that_did_not_come_from_the_page_changes_nothing(
    github_sandbox: GitHubSandbox, page: Page, tamper: dict[str, str]
) -> None:
    token = await page.token("merge-form" if tamper.get("form") else "review-form")
    fields = {"token": tamper.get("token", token), "path": "notes.md", "line": "1", "body": "x"}
    headers = {k: v for k, v in tamper.items() if k in ("Origin", "Sec-Fetch-Site")}
    status, text = await page.post("reviews", fields, headers)
    assert status == 403 and "nothing was done" in text
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and not repo.reviews and not repo.review_comments
