"""The sandbox after the pull request opens, as GitHub does it: a person reviews through
REST with their own token, the App reacts and replies, CI fails with annotations and a job
log behind a 302; each change sends GitHub's webhook. The `github_sandbox` fixture's
teardown checks every request, answer and webhook against GitHub's description and
octokit/webhooks' schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.git import branch_with_file

NOTES = "first line\nsecond line\nthird line\n"


def branch_with_notes(git_path: Path, branch: str, text: str = NOTES) -> str:
    """`branch` = main plus notes.md holding `text`; its commit sha."""
    return branch_with_file(git_path, branch, "notes.md", text)


class Person:
    """Someone using the sandbox's REST API with their own token."""

    def __init__(self, sandbox: GitHubSandbox, session: aiohttp.ClientSession, token: str):
        self.sandbox = sandbox
        self.session = session
        self.headers = {"Authorization": f"token {token}"}

    async def call(
        self, method: str, path: str, body: Any = None, *, status: int | None = None
    ) -> Any:
        url = f"{self.sandbox.url}/repos/{SANDBOX_REPO}{path}"
        async with self.session.request(
            method, url, json=body, headers=self.headers, allow_redirects=False
        ) as response:
            data = await response.json() if response.content_type == "application/json" else None
            if status is not None:
                assert response.status == status, (response.status, data)
            return data


@pytest.fixture
async def pull(github_sandbox: GitHubSandbox) -> dict[str, Any]:
    """An open pull request by the App adding notes.md (the Steelframe PR)."""
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    sha = branch_with_notes(repo.git_path, "steelframe/notes")
    client = github_sandbox.client()
    created = await client.create_pull(
        SANDBOX_REPO, title="Notes", head="steelframe/notes", base="main", body="Closes #1"
    )
    return {"number": created.number, "sha": sha}


@pytest.fixture
async def reviewer(github_sandbox: GitHubSandbox) -> Any:
    token = github_sandbox.user_token("rita", "write")
    async with aiohttp.ClientSession() as session:
        yield Person(github_sandbox, session, token)


def deliveries(github_sandbox: GitHubSandbox, event: str) -> list[dict[str, Any]]:
    return [d.payload for d in github_sandbox.sandbox.hooks.sent if d.event == event]


async def test_a_review_with_two_comments_sends_one_review_webhook_and_lists_its_comments(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    number = pull["number"]
    review = await reviewer.call(
        "POST",
        f"/pulls/{number}/reviews",
        {
            "event": "REQUEST_CHANGES",
            "body": "Two things.",
            "comments": [
                {"path": "notes.md", "line": 1, "body": "Capitalise this."},
                {"path": "notes.md", "line": 3, "side": "RIGHT", "body": "And this."},
            ],
        },
        status=200,
    )
    assert review["state"] == "CHANGES_REQUESTED" and review["user"]["login"] == "rita"
    await github_sandbox.settle()
    submitted = deliveries(github_sandbox, "pull_request_review")
    assert len(submitted) == 1
    assert submitted[0]["action"] == "submitted"
    assert submitted[0]["review"]["state"] == "changes_requested"
    assert submitted[0]["review"]["id"] == review["id"]
    assert submitted[0]["pull_request"]["number"] == number
    created = deliveries(github_sandbox, "pull_request_review_comment")
    assert [c["comment"]["body"] for c in created] == ["Capitalise this.", "And this."]

    listed = await reviewer.call("GET", f"/pulls/{number}/comments", status=200)
    assert [(c["path"], c["line"], c["body"]) for c in listed] == [
        ("notes.md", 1, "Capitalise this."),
        ("notes.md", 3, "And this."),
    ]
    assert all(c["pull_request_review_id"] == review["id"] for c in listed)
    assert "+first line" in listed[0]["diff_hunk"]
    of_review = await reviewer.call(
        "GET", f"/pulls/{number}/reviews/{review['id']}/comments", status=200
    )
    assert [c["id"] for c in of_review] == [c["id"] for c in listed]
    reviews = await reviewer.call("GET", f"/pulls/{number}/reviews", status=200)
    assert [r["id"] for r in reviews] == [review["id"]]


async def test_bad_reviews_are_refused_and_change_nothing(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    number = pull["number"]
    off_diff = {"event": "COMMENT", "body": "x", "comments": [{"path": "notes.md", "line": 9}]}
    for body in (
        {"event": "REQUEST_CHANGES"},  # no body
        {"event": "SHRUG", "body": "x"},
        {**off_diff, "comments": [{"path": "notes.md", "line": 9, "body": "not in the diff"}]},
        {**off_diff, "comments": [{"path": "nowhere.md", "line": 1, "body": "no such file"}]},
    ):
        answer = await reviewer.call("POST", f"/pulls/{number}/reviews", body, status=422)
        assert answer["message"]
    await reviewer.call("POST", "/pulls/999/reviews", {"event": "APPROVE"}, status=404)
    await github_sandbox.settle()
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and not repo.reviews and not repo.review_comments
    assert not deliveries(github_sandbox, "pull_request_review")


async def test_the_app_reacts_and_replies_to_a_review_comment(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    number = pull["number"]
    comment = await reviewer.call(
        "POST",
        f"/pulls/{number}/comments",
        {"body": "Why?", "commit_id": pull["sha"], "path": "notes.md", "line": 2},
        status=201,
    )
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    app = Person(github_sandbox, reviewer.session, token)
    eyes = await app.call(
        "POST", f"/pulls/comments/{comment['id']}/reactions", {"content": "eyes"}, status=201
    )
    again = await app.call(
        "POST", f"/pulls/comments/{comment['id']}/reactions", {"content": "eyes"}, status=200
    )
    assert again["id"] == eyes["id"]  # one reaction per person and kind, as on GitHub
    await app.call(
        "POST", f"/pulls/comments/{comment['id']}/reactions", {"content": "wow"}, status=422
    )
    # GitHub's description: installation tokens may not use the replies endpoint...
    await app.call(
        "POST", f"/pulls/{number}/comments/{comment['id']}/replies", {"body": "x"}, status=403
    )
    # ...an App replies with `in_reply_to`; a person may use either.
    reply = await app.call(
        "POST",
        f"/pulls/{number}/comments",
        # GitHub's schema still wants commit_id and path (ignored with in_reply_to).
        {"body": "Because.", "in_reply_to": comment["id"], "commit_id": "x", "path": "x"},
        status=201,
    )
    person_reply = await reviewer.call(
        "POST", f"/pulls/{number}/comments/{reply['id']}/replies", {"body": "OK"}, status=201
    )
    assert reply["in_reply_to_id"] == person_reply["in_reply_to_id"] == comment["id"]
    assert (reply["path"], reply["line"]) == ("notes.md", 2)
    shown = await reviewer.call("GET", f"/pulls/comments/{comment['id']}", status=200)
    assert shown["reactions"]["eyes"] == 1 and shown["reactions"]["total_count"] == 1
    await github_sandbox.settle()
    created = deliveries(github_sandbox, "pull_request_review_comment")
    assert [c["comment"]["body"] for c in created] == ["Why?", "Because.", "OK"]
    assert created[1]["sender"]["login"].endswith("[bot]")
    assert created[1]["comment"]["in_reply_to_id"] == comment["id"]


async def test_an_issue_comment_gets_an_eyes_reaction(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    comment = await reviewer.call(
        "POST", f"/issues/{pull['number']}/comments", {"body": "Ping"}, status=201
    )
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    app = Person(github_sandbox, reviewer.session, token)
    reaction = await app.call(
        "POST", f"/issues/comments/{comment['id']}/reactions", {"content": "eyes"}, status=201
    )
    assert reaction["content"] == "eyes" and reaction["user"]["login"].endswith("[bot]")
    shown = await reviewer.call("GET", f"/issues/comments/{comment['id']}", status=200)
    assert shown["reactions"]["eyes"] == 1


@pytest.fixture
async def app(github_sandbox: GitHubSandbox, reviewer: Person) -> Person:
    """The App, calling with an installation token."""
    token = await github_sandbox.client().installation_token(SANDBOX_REPO)
    return Person(github_sandbox, reviewer.session, token)


async def test_a_failing_check_run_with_annotations_sends_check_run_completed(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], app: Person, reviewer: Person
) -> None:
    sha = pull["sha"]
    created = await app.call(
        "POST",
        "/check-runs",
        {"name": "lint", "head_sha": sha, "status": "in_progress"},
        status=201,
    )
    assert created["status"] == "in_progress" and created["conclusion"] is None
    annotation = {
        "path": "notes.md",
        "start_line": 2,
        "end_line": 2,
        "annotation_level": "failure",
        "message": "Line too long",
        "title": "E501",
    }
    updated = await app.call(
        "PATCH",
        f"/check-runs/{created['id']}",
        {
            "conclusion": "failure",
            "output": {"title": "1 error", "summary": "lint failed", "annotations": [annotation]},
        },
        status=200,
    )
    assert (updated["status"], updated["conclusion"]) == ("completed", "failure")
    assert updated["output"]["annotations_count"] == 1
    assert updated["pull_requests"][0]["number"] == pull["number"]
    listed = await reviewer.call("GET", f"/check-runs/{created['id']}/annotations", status=200)
    assert [(a["path"], a["start_line"], a["message"]) for a in listed] == [
        ("notes.md", 2, "Line too long")
    ]
    for_ref = await reviewer.call("GET", "/commits/steelframe/notes/check-runs", status=200)
    assert [r["id"] for r in for_ref["check_runs"]] == [created["id"]]
    # A person cannot write check runs, and nobody can conclude with a made-up word.
    await reviewer.call("POST", "/check-runs", {"name": "x", "head_sha": sha}, status=403)
    await app.call("PATCH", f"/check-runs/{created['id']}", {"conclusion": "meh"}, status=422)
    await github_sandbox.settle()
    completed = [p for p in deliveries(github_sandbox, "check_run") if p["action"] == "completed"]
    assert len(completed) == 1
    assert completed[0]["check_run"]["conclusion"] == "failure"
    assert completed[0]["check_run"]["check_suite"]["head_sha"] == sha
    suites = deliveries(github_sandbox, "check_suite")
    assert [(s["action"], s["check_suite"]["conclusion"]) for s in suites] == [
        ("completed", "failure")
    ]


async def test_a_failing_workflow_run_has_a_job_log_behind_a_redirect(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], app: Person, reviewer: Person
) -> None:
    control = f"{github_sandbox.url}/_sandbox/repos/{SANDBOX_REPO}/commits/{pull['sha']}/checks"
    secret = github_sandbox.control_headers  # the control API's start secret
    log = "collecting tests\nFAILED test_notes.py::test_first - AssertionError\n"
    spec = {
        "name": "tests",
        "log": log,
        "annotations": [{"path": "notes.md", "line": 1, "message": "test_first failed"}],
    }
    async with reviewer.session.post(control, json=spec, headers=secret) as response:
        assert response.status == 201
        made = await response.json()
    async with reviewer.session.post(
        control, json={"annotations": "nope"}, headers=secret
    ) as response:
        assert response.status == 400 and "annotations" in (await response.json())["message"]
    run = await app.call("GET", f"/actions/runs/{made['workflow_run_id']}", status=200)
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert run["pull_requests"][0]["number"] == pull["number"]
    jobs = await app.call("GET", f"/actions/runs/{run['id']}/jobs", status=200)
    assert [(j["name"], j["conclusion"]) for j in jobs["jobs"]] == [("tests", "failure")]
    url = f"{github_sandbox.url}/repos/{SANDBOX_REPO}/actions/jobs/{jobs['jobs'][0]['id']}/logs"
    async with reviewer.session.get(url, headers=app.headers, allow_redirects=False) as response:
        assert response.status == 302
        location = response.headers["Location"]
    async with reviewer.session.get(location) as response:  # no credential, as on GitHub
        assert response.status == 200 and response.content_type == "text/plain"
        assert await response.text() == log
    async with reviewer.session.get(location.replace("signature=", "signature=0")) as response:
        assert response.status == 403
    annotations = await app.call("GET", f"/check-runs/{made['check_run_ids'][0]}/annotations")
    assert annotations[0]["message"] == "test_first failed"
    await github_sandbox.settle()
    events = [(d.event, d.action) for d in github_sandbox.sandbox.hooks.sent]
    assert ("workflow_job", "completed") in events and ("workflow_run", "completed") in events
    assert ("check_run", "completed") in events and ("check_suite", "completed") in events
    finished = deliveries(github_sandbox, "workflow_run")[-1]["workflow_run"]
    assert finished["conclusion"] == "failure" and finished["head_sha"] == pull["sha"]


async def test_the_combined_status_reflects_a_failing_status(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], app: Person, reviewer: Person
) -> None:
    base = f"{github_sandbox.url}/_sandbox/repos/{SANDBOX_REPO}/statuses/{pull['sha']}"
    secret = github_sandbox.control_headers  # the control API's start secret
    combined = await app.call("GET", f"/commits/{pull['sha']}/status", status=200)
    assert (combined["state"], combined["total_count"]) == ("pending", 0)
    for state, context in (("success", "ci/build"), ("failure", "ci/lint")):
        body = {"state": state, "context": context, "description": f"{context} {state}"}
        async with reviewer.session.post(base, json=body, headers=secret) as response:
            assert response.status == 201
    async with reviewer.session.post(base, json={"state": "sideways"}, headers=secret) as response:
        assert response.status == 422
    combined = await app.call("GET", "/commits/steelframe/notes/status", status=200)
    assert combined["state"] == "failure" and combined["sha"] == pull["sha"]
    assert {(s["context"], s["state"]) for s in combined["statuses"]} == {
        ("ci/build", "success"),
        ("ci/lint", "failure"),
    }
    await github_sandbox.settle()
    statuses = deliveries(github_sandbox, "status")
    assert [(s["context"], s["state"]) for s in statuses] == [
        ("ci/build", "success"),
        ("ci/lint", "failure"),
    ]
    assert statuses[0]["branches"][0]["name"] == "steelframe/notes"


def test_a_world_kept_by_an_older_sandbox_loads_with_the_new_fields_empty(tmp_path: Path) -> None:
    """`steelframe dev` keeps its world on disk: one saved before reviews and CI existed
    must still load, with none of them."""
    from github_sandbox.persistence import load_world, save_world
    from github_sandbox.state import AppInfo, Comment, Repo, User, World

    owner = User(1, "octo")
    app = AppInfo(1, "app", "App", owner, User(2, "app[bot]", "Bot"), "", 0.0)
    repo = Repo(3, owner, "tools", 0.0)
    repo.comments[4] = Comment(4, 1, owner, "hi", 0.0, 0.0)
    world = World(app=app)
    world.repos["octo/tools"] = repo
    for name in ("reviews", "review_comments", "check_runs", "statuses", "jobs"):
        del repo.__dict__[name]  # as an older sandbox pickled it
    del repo.comments[4].__dict__["reactions"]
    save_world(world, tmp_path / "world.pickle")
    loaded = load_world(tmp_path / "world.pickle")
    assert loaded is not None
    again = loaded.repos["octo/tools"]
    assert again.reviews == {} and again.check_runs == {} and again.statuses == []
    assert again.comments[4].reactions == [] and again.comments[4].body == "hi"


def test_a_comment_finds_its_line_on_either_side_of_the_diff() -> None:
    from github_sandbox.git import hunk_through

    patch = "@@ -1,3 +1,3 @@\n keep\n-old two\n+new two\n three\n@@ -9 +9,2 @@\n nine\n+ten"
    assert hunk_through(patch, 2) == ("@@ -1,3 +1,3 @@\n keep\n-old two\n+new two", 3)
    assert hunk_through(patch, 2, "LEFT") == ("@@ -1,3 +1,3 @@\n keep\n-old two", 2)
    assert hunk_through(patch, 3, "LEFT") == (
        "@@ -1,3 +1,3 @@\n keep\n-old two\n+new two\n three",
        4,
    )
    assert hunk_through(patch, 10) == ("@@ -9 +9,2 @@\n nine\n+ten", 7)
    assert hunk_through(patch, 10, "LEFT") is None  # the base has no line 10 shown
    assert hunk_through(patch, 5) is None  # between the hunks: not in the diff
