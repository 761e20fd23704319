"""GitHubClient's calls for after the pull request, against the local GitHub sandbox: each
answers a typed record (never a dict), as a reviewer or CI left things."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from bot.github.client import GitHubClient
from bot.github.errors import GitHubRejected
from bot.github.records import CheckRun, JobLog, Reaction, ReviewComment
from tests.conftest import SANDBOX_REPO, FakeTime, GitHubSandbox
from tests.test_sandbox_after_pr import branch_with_notes


@pytest.fixture
async def pr(github_sandbox: GitHubSandbox, github_client: GitHubClient) -> dict[str, Any]:
    """An open pull request adding notes.md, and a review comment a writer left on it."""
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    sha = branch_with_notes(repo.git_path, "steelframe/notes")
    pull = await github_client.create_pull(
        SANDBOX_REPO, title="Notes", head="steelframe/notes", base="main", body=""
    )
    token = github_sandbox.user_token("rita", "write")
    url = f"{github_sandbox.url}/repos/{SANDBOX_REPO}/pulls/{pull.number}/reviews"
    review = {
        "event": "REQUEST_CHANGES",
        "body": "Please fix.",
        "comments": [
            {"path": "notes.md", "line": 1, "body": "Capitalise."},
            {"path": "notes.md", "line": 2, "body": "Shorter."},
        ],
    }
    async with aiohttp.ClientSession(headers={"Authorization": f"token {token}"}) as session:
        async with session.post(url, json=review) as response:
            assert response.status == 200
            made = await response.json()
    return {"number": pull.number, "sha": sha, "review_id": made["id"]}


async def test_reviews_and_their_comments_read_as_records(
    github_client: GitHubClient, pr: dict[str, Any]
) -> None:
    reviews = await github_client.list_reviews(SANDBOX_REPO, pr["number"])
    assert [(r.state, r.body, r.user and r.user.login) for r in reviews] == [
        ("CHANGES_REQUESTED", "Please fix.", "rita")
    ]
    comments = await github_client.list_review_comments(SANDBOX_REPO, pr["number"])
    assert all(isinstance(c, ReviewComment) for c in comments)
    assert [(c.path, c.line, c.body) for c in comments] == [
        ("notes.md", 1, "Capitalise."),
        ("notes.md", 2, "Shorter."),
    ]
    of_review = await github_client.list_comments_for_review(
        SANDBOX_REPO, pr["number"], pr["review_id"]
    )
    assert [c.id for c in of_review] == [c.id for c in comments]
    files = await github_client.list_pull_files(SANDBOX_REPO, pr["number"])
    assert [(f.filename, f.status, f.additions) for f in files] == [("notes.md", "added", 3)]


async def test_eyes_then_a_reply_on_the_thread_once_even_after_a_502(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, pr: dict[str, Any]
) -> None:
    first = (await github_client.list_review_comments(SANDBOX_REPO, pr["number"]))[0]
    eyes = await github_client.react_to_review_comment(SANDBOX_REPO, first.id)
    assert isinstance(eyes, Reaction) and eyes.content == "eyes"
    again = await github_client.react_to_review_comment(SANDBOX_REPO, first.id)
    assert again.id == eyes.id  # a retried reaction is the same one
    path = f"/repos/{SANDBOX_REPO}/pulls/{pr['number']}/comments"
    github_sandbox.fail("server_error", method="POST", path=path, after_effect=True)
    fake = FakeTime()
    client = github_sandbox.client(sleep=fake.sleep)
    reply = await client.reply_to_review_comment(SANDBOX_REPO, pr["number"], first.id, "Done.")
    assert reply.in_reply_to_id == first.id and reply.thread_id == first.id
    assert (reply.path, reply.line) == ("notes.md", 1)
    thread = [
        c
        for c in await github_client.list_review_comments(SANDBOX_REPO, pr["number"])
        if c.thread_id == first.id
    ]
    assert [c.body for c in thread] == ["Capitalise.", "Done."]  # the 502 made no second
    # Replying to a reply joins the same thread.
    second = await github_client.reply_to_review_comment(
        SANDBOX_REPO, pr["number"], reply.id, "And tested."
    )
    assert second.in_reply_to_id == first.id


async def test_a_failing_check_reads_with_its_annotations_job_and_log(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, pr: dict[str, Any]
) -> None:
    log = "".join(f"line {n}\n" for n in range(2000)) + "FAILED test_notes.py::test_first\n"
    control = f"{github_sandbox.url}/_sandbox/repos/{SANDBOX_REPO}/commits/{pr['sha']}/checks"
    spec = {
        "name": "tests",
        "log": log,
        "annotations": [{"path": "notes.md", "line": 1, "message": "test_first failed"}],
    }
    async with aiohttp.ClientSession() as session:
        async with session.post(
            control, json=spec, headers=github_sandbox.control_headers
        ) as response:
            made = await response.json()
    runs = await github_client.list_check_runs_for_ref(SANDBOX_REPO, "steelframe/notes")
    assert [(r.name, r.conclusion) for r in runs] == [("tests", "failure")]
    check = await github_client.get_check_run(SANDBOX_REPO, made["check_run_ids"][0])
    assert isinstance(check, CheckRun) and check.output.annotations_count == 1
    assert check.app is not None and check.app.slug == "github-actions"
    annotations = await github_client.list_check_run_annotations(SANDBOX_REPO, check.id)
    assert [(a.path, a.start_line, a.message) for a in annotations] == [
        ("notes.md", 1, "test_first failed")
    ]
    run = await github_client.get_workflow_run(SANDBOX_REPO, made["workflow_run_id"])
    assert (run.conclusion, run.head_sha) == ("failure", pr["sha"])
    jobs = await github_client.list_jobs(SANDBOX_REPO, run.id)
    assert [(j.name, j.conclusion) for j in jobs] == [("tests", "failure")]
    whole = await github_client.download_job_log(SANDBOX_REPO, jobs[0].id)
    assert whole == JobLog(jobs[0].id, log, truncated=False)
    tail = await github_client.download_job_log(SANDBOX_REPO, jobs[0].id, max_bytes=100)
    assert tail.truncated and tail.text.endswith("FAILED test_notes.py::test_first\n")
    assert len(tail.text) == 100


async def test_combined_status_merge_state_and_a_merge_that_checks_the_head(
    github_sandbox: GitHubSandbox, github_client: GitHubClient, pr: dict[str, Any]
) -> None:
    url = f"{github_sandbox.url}/_sandbox/repos/{SANDBOX_REPO}/statuses/{pr['sha']}"
    async with aiohttp.ClientSession() as session:
        for state in ("pending", "failure"):
            async with session.post(
                url,
                json={"state": state, "context": "ci/x"},
                headers=github_sandbox.control_headers,
            ) as response:
                assert response.status == 201
    status = await github_client.combined_status(SANDBOX_REPO, pr["sha"])
    assert (status.state, status.total_count) == ("failure", 1)
    assert [(s.context, s.state) for s in status.statuses] == [("ci/x", "failure")]
    state = await github_client.merge_state(SANDBOX_REPO, pr["number"])
    assert (state.state, state.merged, state.head.sha) == ("open", False, pr["sha"])
    with pytest.raises(GitHubRejected) as refused:
        await github_client.merge_pull(SANDBOX_REPO, pr["number"], sha="0" * 40)
    assert refused.value.github_status == 409
    merged = await github_client.merge_pull(SANDBOX_REPO, pr["number"], sha=pr["sha"])
    assert merged.merged and merged.sha == pr["sha"]
    after = await github_client.merge_state(SANDBOX_REPO, pr["number"])
    assert (after.state, after.merged, after.merge_commit_sha) == ("closed", True, pr["sha"])
