"""Where the sandbox's CI, review comments and issues answered or notified what GitHub
would not: a re-concluded check run left its suite's conclusion as it was; only
`completed` CI webhooks were sent; a review comment on a commit outside the pull request
was taken; `list_issues` ignored `milestone`, `assignee`, `mentioned` and `type`, and
issues took no assignees; the jobs of a workflow run ignored `filter`. The
`github_sandbox` fixture's teardown checks every exchange and webhook against GitHub's
description and octokit/webhooks' schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp

from github_sandbox.state import Milestone
from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.test_sandbox_after_pr import Person, deliveries
from tests.test_sandbox_after_pr import app as app  # the `app` fixture
from tests.test_sandbox_after_pr import pull as pull  # the `pull` fixture
from tests.test_sandbox_after_pr import reviewer as reviewer  # the `reviewer` fixture
from tests.test_sandbox_git_http import commit_file, run_git, scoped_clone


def _sent(github_sandbox: GitHubSandbox) -> list[tuple[str, str | None]]:
    return [(d.event, d.action) for d in github_sandbox.sandbox.hooks.sent]


async def _control_checks(
    github_sandbox: GitHubSandbox, session: aiohttp.ClientSession, sha: str, spec: dict[str, Any]
) -> dict[str, Any]:
    url = f"{github_sandbox.url}/_sandbox/repos/{SANDBOX_REPO}/commits/{sha}/checks"
    async with session.post(url, json=spec, headers=github_sandbox.control_headers) as response:
        assert response.status == 201, await response.text()
        made: dict[str, Any] = await response.json()
    await github_sandbox.settle()
    return made


# -- 1. a completed check run concluded again -------------------------------------------


async def test_a_check_run_concluded_again_concludes_its_suite_again(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], app: Person
) -> None:
    """GitHub recomputes a suite's conclusion when one of its completed runs is concluded
    with another word (a re-run passing, a person's override), and sends `check_run` and
    `check_suite` `completed` again; the sandbox kept the suite `failure`, silently."""
    sha = pull["sha"]
    made = {"name": "lint", "head_sha": sha, "conclusion": "failure"}
    made["output"] = {"title": "1 error", "summary": "lint failed"}
    run = await app.call("POST", "/check-runs", made, status=201)
    await app.call("PATCH", f"/check-runs/{run['id']}", {"conclusion": "success"}, status=200)
    # The same word again changes nothing, and sends nothing.
    await app.call("PATCH", f"/check-runs/{run['id']}", {"conclusion": "success"}, status=200)
    await github_sandbox.settle()
    suites = deliveries(github_sandbox, "check_suite")
    assert [(s["action"], s["check_suite"]["conclusion"]) for s in suites] == [
        ("completed", "failure"),
        ("completed", "success"),
    ]
    runs = [p for p in deliveries(github_sandbox, "check_run") if p["action"] == "completed"]
    assert [p["check_run"]["conclusion"] for p in runs] == ["failure", "success"]


# -- 2. the webhooks of a CI run on the way, not only its end ------------------------------


async def test_an_actions_run_sends_its_requested_queued_and_in_progress_webhooks_first(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    made = await _control_checks(
        github_sandbox, reviewer.session, pull["sha"], {"name": "tests", "workflow": "CI"}
    )
    ci = {"check_run", "check_suite", "workflow_run", "workflow_job"}
    assert [sent for sent in _sent(github_sandbox) if sent[0] in ci] == [
        ("workflow_run", "requested"),
        ("workflow_job", "queued"),
        ("check_run", "created"),
        ("workflow_job", "in_progress"),
        ("workflow_run", "in_progress"),
        ("workflow_job", "completed"),
        ("check_run", "completed"),
        ("check_suite", "completed"),
        ("workflow_run", "completed"),
    ]
    runs = deliveries(github_sandbox, "workflow_run")
    assert [(r["workflow_run"]["status"], r["workflow_run"]["conclusion"]) for r in runs] == [
        ("queued", None),
        ("in_progress", None),
        ("completed", "failure"),
    ]
    jobs = deliveries(github_sandbox, "workflow_job")
    assert [j["workflow_job"]["status"] for j in jobs] == ["queued", "in_progress", "completed"]
    assert jobs[0]["workflow_job"]["runner_name"] is None  # no runner while queued
    assert all(j["workflow_job"]["id"] == made["job_ids"][0] for j in jobs)


async def test_a_push_requests_the_apps_check_suite_for_the_pushed_head(
    github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    """GitHub sends `check_suite.requested` to an App with `checks: write` for new code
    pushed to its repository; the App's check runs on that commit join that suite."""
    # An App with `checks: write` (Steelframe's app.yml asks `read`: it gets no suite).
    github_sandbox.sandbox.world.app.permissions["checks"] = "write"
    work = tmp_path / "work"
    token, url = await scoped_clone(github_sandbox, work, "write")
    await run_git("checkout", "-q", "-b", "topic", cwd=work, token=None, url="")
    await commit_file(work, "A.md", "a\n")
    pushed = await run_git("push", "-q", url, "topic", cwd=work, token=token, url=url)
    assert pushed.returncode == 0, pushed.stderr
    await github_sandbox.settle()
    (requested,) = deliveries(github_sandbox, "check_suite")
    head = (await run_git("rev-parse", "HEAD", cwd=work, token=None, url="")).stdout.strip()
    suite = requested["check_suite"]
    assert requested["action"] == "requested"
    assert (suite["head_sha"], suite["head_branch"], suite["status"]) == (head, "topic", "queued")
    assert suite["app"]["id"] == github_sandbox.app_id
    created = await github_sandbox.client().request(
        "POST", SANDBOX_REPO, "/check-runs", payload={"name": "lint", "head_sha": head}
    )
    assert created.data["check_suite"]["id"] == suite["id"]


# -- 3. a review comment's commit ---------------------------------------------------------


async def test_a_review_comment_on_a_commit_outside_the_pull_request_is_refused(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person
) -> None:
    """GitHub: 422, `commit_id is not part of the pull request`; the sandbox took any
    string and placed the comment on the head."""
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None and repo.git_path is not None
    base = (await run_git("rev-parse", "main", cwd=repo.git_path, token=None, url="")).stdout
    number = pull["number"]
    comment = {"body": "Why?", "path": "notes.md", "line": 1}
    for commit in (base.strip(), "f" * 40, pull["sha"][:12]):
        refused = await reviewer.call(
            "POST", f"/pulls/{number}/comments", {**comment, "commit_id": commit}, status=422
        )
        assert refused["errors"] == [
            {
                "resource": "PullRequestReviewComment",
                "code": "custom",
                "field": "commit_id",
                "message": "commit_id is not part of the pull request",
            }
        ]
    taken = await reviewer.call(
        "POST", f"/pulls/{number}/comments", {**comment, "commit_id": pull["sha"]}, status=201
    )
    assert taken["commit_id"] == pull["sha"]
    listed = await reviewer.call("GET", f"/pulls/{number}/comments", status=200)
    assert [c["id"] for c in listed] == [taken["id"]]


# -- 4. list filters ------------------------------------------------------------------------


async def test_issues_are_listed_by_milestone_assignee_mention_and_type(
    github_sandbox: GitHubSandbox, reviewer: Person
) -> None:
    client = github_sandbox.client()
    numbers = [
        (await client.create_issue(SANDBOX_REPO, title=f"Issue {n}", body=body)).number
        for n, body in enumerate(("Ask @rita about it", "nothing", "mail rita@example.com"))
    ]
    first, second, third = numbers
    await client.create_comment(SANDBOX_REPO, second, "cc @Rita")
    await github_sandbox.settle()
    # No described operation sets these in the sandbox yet: seeded in its world.
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    assert repo is not None
    rita = github_sandbox.sandbox.world.user("rita")
    milestone = Milestone(901, 1, "v1", rita, 0.0)
    repo.issues[first].milestone = milestone
    repo.issues[first].assignees = [rita]
    repo.issues[second].issue_type = "Bug"

    async def listed(query: str) -> list[int]:
        found = await reviewer.call("GET", f"/issues?{query}&direction=asc", status=200)
        return [issue["number"] for issue in found]

    assert await listed("milestone=1") == [first]
    assert await listed("milestone=2") == []
    assert await listed("milestone=*") == [first]
    assert await listed("milestone=none") == [second, third]
    assert await listed("assignee=RITA") == [first]
    assert await listed("assignee=*") == [first]
    assert await listed("assignee=none") == [second, third]
    assert await listed("mentioned=rita") == [first, second]  # the body, or a comment
    assert await listed("type=bug") == [second]
    assert await listed("type=*") == [second]
    assert await listed("type=none") == [first, third]
    assert await listed("assignee=rita&type=bug") == []
    shown = await reviewer.call("GET", f"/issues?milestone={milestone.number}", status=200)
    assert shown[0]["milestone"]["title"] == "v1" and shown[0]["assignee"]["login"] == "rita"


async def test_the_jobs_of_a_rerun_workflow_are_its_latest_attempts_unless_all_are_asked(
    github_sandbox: GitHubSandbox, pull: dict[str, Any], reviewer: Person, app: Person
) -> None:
    """`filter=latest` (the default): the jobs of the run's most recent execution; `all`:
    every attempt's. The sandbox listed every job whatever the filter."""
    first = await _control_checks(github_sandbox, reviewer.session, pull["sha"], {})
    again = await _control_checks(
        github_sandbox, reviewer.session, pull["sha"], {"rerun": first["workflow_run_id"]}
    )
    assert again["workflow_run_id"] == first["workflow_run_id"] and again["run_attempt"] == 2
    path = f"/actions/runs/{first['workflow_run_id']}/jobs"
    latest = await app.call("GET", path, status=200)
    assert [(j["id"], j["run_attempt"]) for j in latest["jobs"]] == [(again["job_ids"][0], 2)]
    assert latest == await app.call("GET", f"{path}?filter=latest", status=200)
    every = await app.call("GET", f"{path}?filter=all", status=200)
    assert [(j["id"], j["run_attempt"]) for j in every["jobs"]] == [
        (first["job_ids"][0], 1),
        (again["job_ids"][0], 2),
    ]
    assert every["total_count"] == 2
    run = await app.call("GET", f"/actions/runs/{first['workflow_run_id']}", status=200)
    assert run["run_attempt"] == 2 and run["previous_attempt_url"].endswith("/attempts/1")


async def test_assignees_set_through_rest_are_listed_and_sent(
    github_sandbox: GitHubSandbox, reviewer: Person
) -> None:
    """`issues/create` and `issues/update` take `assignees` (the sandbox dropped them):
    assignable users only (422 naming the login otherwise), each change a webhook."""
    github_sandbox.user_token("sam", "triage")  # a collaborator: assignable
    made = await reviewer.call(
        "POST", "/issues", {"title": "Paint it", "assignees": ["rita", "Sam"]}, status=201
    )
    assert [u["login"] for u in made["assignees"]] == ["rita", "sam"]
    refused = await reviewer.call(
        "POST", "/issues", {"title": "Nope", "assignees": ["stranger"]}, status=422
    )
    assert refused["errors"] == [
        {"value": "stranger", "resource": "Issue", "field": "assignees", "code": "invalid"}
    ]
    number = made["number"]
    assert [i["number"] for i in await reviewer.call("GET", "/issues?assignee=sam")] == [number]
    await reviewer.call("PATCH", f"/issues/{number}", {"assignees": ["rita"]}, status=200)
    assert await reviewer.call("GET", "/issues?assignee=sam") == []
    await github_sandbox.settle()
    changes = [
        (p["action"], p["assignee"]["login"])
        for p in deliveries(github_sandbox, "issues")
        if p["action"] in ("assigned", "unassigned")
    ]
    assert changes == [("assigned", "rita"), ("assigned", "sam"), ("unassigned", "sam")]
