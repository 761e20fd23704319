"""What each repository operation the sandbox serves asks of an installation token: the
permission and level GitHub's docs name for it ("Permissions required for GitHub Apps"),
and whether installation tokens may call it at all (GitHub's description marks the
operations they may not with `x-github.enabledForGitHubApps: false`).

Keyed by (method, route) as GitHub's OpenAPI description spells them, with its operation
id beside each: a test checks this table against the description (every described
repository operation has exactly one row; the ids, the App flag and the permission its
`x-github` category names agree, merging being the one exception: contents) and against
the client's own table in `bot.github.client`.
"""

from __future__ import annotations

from dataclasses import dataclass

READ, WRITE = 1, 2
R = "/repos/{owner}/{repo}"


@dataclass(frozen=True)
class Need:
    operation_id: str
    permission: str  # the fine-grained permission's name
    level: int  # READ or WRITE
    installation_tokens: bool = True  # False: GitHub answers an installation 403


def _row(operation_id: str, permission: str, level: int, *, apps: bool = True) -> Need:
    return Need(operation_id, permission, level, apps)


OPERATIONS: dict[tuple[str, str], Need] = {
    ("GET", R): _row("repos/get", "metadata", READ),
    ("GET", R + "/contents/{path}"): _row("repos/get-content", "contents", READ),
    ("GET", R + "/collaborators/{username}/permission"): _row(
        "repos/get-collaborator-permission-level", "metadata", READ
    ),
    # issues, labels, issue comments
    ("GET", R + "/issues"): _row("issues/list-for-repo", "issues", READ),
    ("POST", R + "/issues"): _row("issues/create", "issues", WRITE),
    ("GET", R + "/issues/{issue_number}"): _row("issues/get", "issues", READ),
    ("PATCH", R + "/issues/{issue_number}"): _row("issues/update", "issues", WRITE),
    ("GET", R + "/issues/{issue_number}/timeline"): _row(
        "issues/list-events-for-timeline", "issues", READ
    ),
    ("GET", R + "/labels"): _row("issues/list-labels-for-repo", "issues", READ),
    ("POST", R + "/labels"): _row("issues/create-label", "issues", WRITE),
    ("GET", R + "/issues/{issue_number}/labels"): _row(
        "issues/list-labels-on-issue", "issues", READ
    ),
    ("POST", R + "/issues/{issue_number}/labels"): _row("issues/add-labels", "issues", WRITE),
    ("DELETE", R + "/issues/{issue_number}/labels/{name}"): _row(
        "issues/remove-label", "issues", WRITE
    ),
    ("GET", R + "/issues/{issue_number}/comments"): _row("issues/list-comments", "issues", READ),
    ("POST", R + "/issues/{issue_number}/comments"): _row("issues/create-comment", "issues", WRITE),
    ("GET", R + "/issues/comments/{comment_id}"): _row("issues/get-comment", "issues", READ),
    ("PATCH", R + "/issues/comments/{comment_id}"): _row("issues/update-comment", "issues", WRITE),
    ("DELETE", R + "/issues/comments/{comment_id}"): _row("issues/delete-comment", "issues", WRITE),
    ("POST", R + "/issues/comments/{comment_id}/reactions"): _row(
        "reactions/create-for-issue-comment", "issues", WRITE
    ),
    # pull requests, reviews, review comments
    ("GET", R + "/pulls"): _row("pulls/list", "pull_requests", READ),
    ("POST", R + "/pulls"): _row("pulls/create", "pull_requests", WRITE),
    ("GET", R + "/pulls/{pull_number}"): _row("pulls/get", "pull_requests", READ),
    ("PATCH", R + "/pulls/{pull_number}"): _row("pulls/update", "pull_requests", WRITE),
    ("GET", R + "/pulls/{pull_number}/files"): _row("pulls/list-files", "pull_requests", READ),
    # Merging writes the base branch: GitHub asks for contents, not pull_requests.
    ("PUT", R + "/pulls/{pull_number}/merge"): _row("pulls/merge", "contents", WRITE),
    ("POST", R + "/pulls/{pull_number}/requested_reviewers"): _row(
        "pulls/request-reviewers", "pull_requests", WRITE
    ),
    ("GET", R + "/pulls/{pull_number}/reviews"): _row("pulls/list-reviews", "pull_requests", READ),
    ("POST", R + "/pulls/{pull_number}/reviews"): _row(
        "pulls/create-review", "pull_requests", WRITE
    ),
    ("GET", R + "/pulls/{pull_number}/reviews/{review_id}/comments"): _row(
        "pulls/list-comments-for-review", "pull_requests", READ
    ),
    ("GET", R + "/pulls/{pull_number}/comments"): _row(
        "pulls/list-review-comments", "pull_requests", READ
    ),
    ("POST", R + "/pulls/{pull_number}/comments"): _row(
        "pulls/create-review-comment", "pull_requests", WRITE
    ),
    ("POST", R + "/pulls/{pull_number}/comments/{comment_id}/replies"): _row(
        "pulls/create-reply-for-review-comment", "pull_requests", WRITE, apps=False
    ),
    ("GET", R + "/pulls/comments/{comment_id}"): _row(
        "pulls/get-review-comment", "pull_requests", READ
    ),
    ("POST", R + "/pulls/comments/{comment_id}/reactions"): _row(
        "reactions/create-for-pull-request-review-comment", "pull_requests", WRITE
    ),
    # CI: checks, statuses, Actions
    ("POST", R + "/check-runs"): _row("checks/create", "checks", WRITE),
    ("GET", R + "/check-runs/{check_run_id}"): _row("checks/get", "checks", READ),
    ("PATCH", R + "/check-runs/{check_run_id}"): _row("checks/update", "checks", WRITE),
    ("GET", R + "/check-runs/{check_run_id}/annotations"): _row(
        "checks/list-annotations", "checks", READ
    ),
    ("GET", R + "/commits/{ref}/check-runs"): _row("checks/list-for-ref", "checks", READ),
    ("GET", R + "/commits/{ref}/status"): _row(
        "repos/get-combined-status-for-ref", "statuses", READ
    ),
    ("GET", R + "/actions/runs/{run_id}"): _row("actions/get-workflow-run", "actions", READ),
    ("GET", R + "/actions/runs/{run_id}/jobs"): _row(
        "actions/list-jobs-for-workflow-run", "actions", READ
    ),
    ("GET", R + "/actions/jobs/{job_id}/logs"): _row(
        "actions/download-job-logs-for-workflow-run", "actions", READ
    ),
}
