"""GitHub's JSON shapes for CI on a commit: check runs and suites with annotations, commit
statuses and the combined status, Actions workflow runs and jobs; as the REST API answers
and as the `check_run`, `check_suite`, `status`, `workflow_run` and `workflow_job` webhooks
carry them (tests validate both against GitHub's description and octokit/webhooks')."""

from __future__ import annotations

from typing import Any

from github_sandbox.git import CommitInfo
from github_sandbox.shapes import Shapes, node_id
from github_sandbox.state import (
    Annotation,
    CheckRun,
    CheckSuite,
    CommitStatus,
    Job,
    Pull,
    Repo,
    WorkflowRun,
    iso,
)

# `repository-lite` (what workflow runs name their repositories with) allows only these.
REPOSITORY_LITE_KEYS = frozenset(
    {
        "archive_url", "assignees_url", "blobs_url", "branches_url", "collaborators_url",
        "comments_url", "commits_url", "compare_url", "contents_url", "contributors_url",
        "deployments_url", "description", "downloads_url", "events_url", "fork", "forks_url",
        "full_name", "git_commits_url", "git_refs_url", "git_tags_url", "hooks_url", "html_url",
        "id", "issue_comment_url", "issue_events_url", "issues_url", "keys_url", "labels_url",
        "languages_url", "merges_url", "milestones_url", "name", "node_id", "notifications_url",
        "owner", "private", "pulls_url", "releases_url", "stargazers_url", "statuses_url",
        "subscribers_url", "subscription_url", "tags_url", "teams_url", "trees_url", "url",
    }
)  # fmt: skip
RUNNER = {
    "labels": ["ubuntu-latest"],
    "runner_id": 1,
    "runner_name": "Sandbox runner 1",
    "runner_group_id": 1,
    "runner_group_name": "Sandbox runners",
}


def repository_lite(shapes: Shapes, repo: Repo) -> dict[str, Any]:
    return {k: v for k, v in shapes.repository(repo).items() if k in REPOSITORY_LITE_KEYS}


def pull_ref(shapes: Shapes, repo: Repo, pull: Pull) -> dict[str, Any]:
    """A pull request as check runs and suites list it (`check-run-pull-request`)."""
    repo_ref = {"id": repo.id, "url": f"{shapes.api}/repos/{repo.full_name}", "name": repo.name}
    return {
        "url": f"{shapes.api}/repos/{repo.full_name}/pulls/{pull.number}",
        "id": pull.id,
        "number": pull.number,
        "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": repo_ref},
        "base": {"ref": pull.base_ref, "sha": pull.base_sha, "repo": repo_ref},
    }


def annotation(shapes: Shapes, repo: Repo, sha: str, item: Annotation) -> dict[str, Any]:
    return {
        "path": item.path,
        "start_line": item.start_line,
        "end_line": item.end_line,
        "start_column": None,
        "end_column": None,
        "annotation_level": item.annotation_level,
        "title": item.title,
        "message": item.message,
        "raw_details": item.raw_details,
        "blob_href": f"{shapes.html}/{repo.full_name}/blob/{sha}/{item.path}",
    }


def check_run(
    shapes: Shapes,
    repo: Repo,
    run: CheckRun,
    *,
    app: dict[str, Any],
    pulls: list[Pull],
    suite: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`suite`: the whole suite (webhooks carry it); REST answers name only its id."""
    url = f"{shapes.api}/repos/{repo.full_name}/check-runs/{run.id}"
    return {
        "id": run.id,
        "head_sha": run.head_sha,
        "node_id": node_id("CheckRun", run.id),
        "external_id": run.external_id,
        "url": url,
        "html_url": f"{shapes.html}/{repo.full_name}/runs/{run.id}",
        "details_url": run.details_url or f"{shapes.html}/{repo.full_name}/runs/{run.id}",
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": iso(run.started_at),
        "completed_at": None if run.completed_at is None else iso(run.completed_at),
        "output": {
            "title": run.title,
            "summary": run.summary,
            "text": run.text,
            "annotations_count": len(run.annotations),
            "annotations_url": f"{url}/annotations",
        },
        "name": run.name,
        "check_suite": suite if suite is not None else {"id": run.suite_id},
        "app": app,
        "pull_requests": [pull_ref(shapes, repo, pull) for pull in pulls],
    }


def check_suite(
    shapes: Shapes,
    repo: Repo,
    suite: CheckSuite,
    *,
    app: dict[str, Any],
    pulls: list[Pull],
    runs: int,
    commit: CommitInfo | None,
) -> dict[str, Any]:
    """A suite as webhooks carry it; `commit` adds `head_commit` (the `check_suite` event)."""
    url = f"{shapes.api}/repos/{repo.full_name}/check-suites/{suite.id}"
    shape: dict[str, Any] = {
        "id": suite.id,
        "node_id": node_id("CheckSuite", suite.id),
        "head_branch": suite.head_branch,
        "head_sha": suite.head_sha,
        "status": suite.status,
        "conclusion": suite.conclusion,
        "url": url,
        "before": None,
        "after": suite.head_sha,
        "pull_requests": [pull_ref(shapes, repo, pull) for pull in pulls],
        "app": app,
        "created_at": iso(suite.created_at),
        "updated_at": iso(suite.updated_at),
    }
    if commit is not None:
        shape["latest_check_runs_count"] = runs
        shape["check_runs_url"] = f"{url}/check-runs"
        shape["head_commit"] = head_commit(commit)
    return shape


def head_commit(commit: CommitInfo) -> dict[str, Any]:
    person = {"name": commit.author_name, "email": commit.author_email}
    return {
        "id": commit.sha,
        "tree_id": commit.tree,
        "message": commit.message,
        "timestamp": iso(commit.timestamp),
        "author": person,
        "committer": person,
    }


def simple_status(shapes: Shapes, repo: Repo, item: CommitStatus) -> dict[str, Any]:
    return {
        "url": f"{shapes.api}/repos/{repo.full_name}/statuses/{item.sha}",
        "avatar_url": f"{shapes.html}/avatars/u/{item.creator.id}",
        "id": item.id,
        "node_id": node_id("StatusContext", item.id),
        "state": item.state,
        "description": item.description,
        "target_url": item.target_url,
        "context": item.context,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
    }


def combined_state(statuses: list[CommitStatus]) -> str:
    """GitHub's rule: failure if any context is error or failure, pending if any is pending
    (or there is none), else success."""
    states = {item.state for item in statuses}
    if states & {"error", "failure"}:
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def combined_status(
    shapes: Shapes, repo: Repo, sha: str, latest: list[CommitStatus]
) -> dict[str, Any]:
    api = f"{shapes.api}/repos/{repo.full_name}"
    return {
        "state": combined_state(latest),
        "statuses": [simple_status(shapes, repo, item) for item in latest],
        "sha": sha,
        "total_count": len(latest),
        "repository": shapes.repository(repo),
        "commit_url": f"{api}/commits/{sha}",
        "url": f"{api}/commits/{sha}/status",
    }


def status_event(
    shapes: Shapes, repo: Repo, item: CommitStatus, commit: CommitInfo, branches: list[str]
) -> dict[str, Any]:
    """The `status` webhook's fields (the caller adds repository, sender, installation)."""
    api = f"{shapes.api}/repos/{repo.full_name}"
    person = {
        "name": commit.author_name,
        "email": commit.author_email,
        "date": iso(commit.timestamp),
    }
    return {
        "id": item.id,
        "sha": item.sha,
        "name": repo.full_name,
        "target_url": item.target_url,
        "avatar_url": f"{shapes.html}/avatars/u/{item.creator.id}",
        "context": item.context,
        "description": item.description,
        "state": item.state,
        "commit": {
            "sha": commit.sha,
            "node_id": node_id("Commit", repo.id),
            "commit": {
                "author": person,
                "committer": person,
                "message": commit.message,
                "tree": {"sha": commit.tree, "url": f"{api}/git/trees/{commit.tree}"},
                "url": f"{api}/git/commits/{commit.sha}",
                "comment_count": 0,
                "verification": {
                    "verified": False,
                    "reason": "unsigned",
                    "signature": None,
                    "payload": None,
                },
            },
            "url": f"{api}/commits/{commit.sha}",
            "html_url": f"{shapes.html}/{repo.full_name}/commit/{commit.sha}",
            "comments_url": f"{api}/commits/{commit.sha}/comments",
            "author": None,
            "committer": None,
            "parents": [
                {
                    "sha": parent,
                    "url": f"{api}/commits/{parent}",
                    "html_url": f"{shapes.html}/{repo.full_name}/commit/{parent}",
                }
                for parent in commit.parents
            ],
        },
        "branches": [
            {
                "name": name,
                "commit": {"sha": item.sha, "url": f"{api}/commits/{item.sha}"},
                "protected": False,
            }
            for name in branches
        ],
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
    }


def workflow(shapes: Shapes, repo: Repo, run: WorkflowRun) -> dict[str, Any]:
    api = f"{shapes.api}/repos/{repo.full_name}"
    html = f"{shapes.html}/{repo.full_name}"
    return {
        "badge_url": f"{html}/workflows/{run.name}/badge.svg",
        "created_at": iso(run.created_at),
        "html_url": f"{html}/blob/{repo.default_branch}/{run.path}",
        "id": run.workflow_id,
        "name": run.name,
        "node_id": node_id("Workflow", run.workflow_id),
        "path": run.path,
        "state": "active",
        "updated_at": iso(run.created_at),
        "url": f"{api}/actions/workflows/{run.workflow_id}",
    }


def workflow_run(
    shapes: Shapes,
    repo: Repo,
    run: WorkflowRun,
    *,
    pulls: list[Pull],
    commit: CommitInfo | None,
) -> dict[str, Any]:
    """A workflow run as the REST API and the `workflow_run` webhook both carry it (the
    fields are the webhook's, which the REST schema also accepts)."""
    api = f"{shapes.api}/repos/{repo.full_name}"
    url = f"{api}/actions/runs/{run.id}"
    lite = repository_lite(shapes, repo)
    fallback = CommitInfo(run.head_sha, "", "", int(run.created_at), "", "", ())
    return {
        "id": run.id,
        "name": run.name,
        "node_id": node_id("WorkflowRun", run.id),
        "check_suite_id": run.suite_id,
        "check_suite_node_id": node_id("CheckSuite", run.suite_id),
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": run.path,
        "display_title": run.name,
        "run_number": run.run_number,
        "run_attempt": run.run_attempt,
        "event": run.event,
        "status": run.status,
        "conclusion": run.conclusion,
        "workflow_id": run.workflow_id,
        "url": url,
        "html_url": f"{shapes.html}/{repo.full_name}/actions/runs/{run.id}",
        "pull_requests": [pull_ref(shapes, repo, pull) for pull in pulls],
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "run_started_at": iso(run.created_at),
        "actor": shapes.user(run.actor),
        "triggering_actor": shapes.user(run.actor),
        "jobs_url": f"{url}/jobs",
        "logs_url": f"{url}/logs",
        "check_suite_url": f"{api}/check-suites/{run.suite_id}",
        "artifacts_url": f"{url}/artifacts",
        "cancel_url": f"{url}/cancel",
        "rerun_url": f"{url}/rerun",
        "previous_attempt_url": (
            None if run.run_attempt == 1 else f"{url}/attempts/{run.run_attempt - 1}"
        ),
        "workflow_url": f"{api}/actions/workflows/{run.workflow_id}",
        "head_commit": head_commit(commit or fallback),
        "repository": lite,
        "head_repository": lite,
    }


def job(shapes: Shapes, repo: Repo, item: Job, run: WorkflowRun) -> dict[str, Any]:
    api = f"{shapes.api}/repos/{repo.full_name}"
    started = item.started_at if item.started_at is not None else item.created_at
    step_conclusion = item.conclusion if item.status == "completed" else None
    queued = item.status == "queued"
    # A queued job has no runner and no step started yet (octokit's `workflow_job.queued`
    # schema: runner fields null "as long as workflow_job[status] is queued").
    runner = {key: None for key in RUNNER} | {"labels": RUNNER["labels"]} if queued else RUNNER
    steps = [
        {
            "name": item.name,
            "status": item.status,
            "conclusion": step_conclusion,
            "number": 1,
            "started_at": iso(started),
            "completed_at": None if item.completed_at is None else iso(item.completed_at),
        }
    ]
    return {
        "id": item.id,
        "run_id": item.run_id,
        "run_url": f"{api}/actions/runs/{item.run_id}",
        "run_attempt": item.run_attempt,
        "node_id": node_id("CheckRun", item.id),
        "head_sha": item.head_sha,
        "head_branch": item.head_branch,
        "url": f"{api}/actions/jobs/{item.id}",
        "html_url": f"{shapes.html}/{repo.full_name}/actions/runs/{item.run_id}/job/{item.id}",
        "status": item.status,
        "conclusion": item.conclusion,
        "created_at": iso(item.created_at),
        "started_at": iso(started),
        "completed_at": None if item.completed_at is None else iso(item.completed_at),
        "name": item.name,
        "steps": [] if queued else steps,
        "check_run_url": f"{api}/check-runs/{item.check_run_id}",
        "workflow_name": run.name,
        **runner,
    }
