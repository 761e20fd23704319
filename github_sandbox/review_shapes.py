"""GitHub's JSON shapes for a pull request's reviews, review comments, reactions and files,
as the REST API and the `pull_request_review*` webhooks send them (tests validate both
against GitHub's OpenAPI description and octokit/webhooks' schemas)."""

from __future__ import annotations

from typing import Any

from github_sandbox.git import ChangedFile
from github_sandbox.shapes import Shapes, author_association, node_id
from github_sandbox.state import Pull, Reaction, Repo, Review, ReviewComment, iso

REACTION_CONTENTS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
# The keys of a pull request as webhooks about reviews carry it (the `simple-pull-request`
# schema, which allows no others): the REST answer's keys minus its merge and count fields.
SIMPLE_PULL_KEYS = frozenset(
    {
        "_links", "active_lock_reason", "assignee", "assignees", "author_association",
        "auto_merge", "base", "body", "closed_at", "comments_url", "commits_url", "created_at",
        "diff_url", "draft", "head", "html_url", "id", "issue_url", "labels", "locked",
        "merge_commit_sha", "merged_at", "milestone", "node_id", "number", "patch_url",
        "requested_reviewers", "requested_teams", "review_comment_url", "review_comments_url",
        "state", "statuses_url", "title", "updated_at", "url", "user",
    }
)  # fmt: skip


def simple_pull(shapes: Shapes, repo: Repo, pull: Pull) -> dict[str, Any]:
    return {k: v for k, v in shapes.pull(repo, pull).items() if k in SIMPLE_PULL_KEYS}


def reaction(shapes: Shapes, item: Reaction) -> dict[str, Any]:
    return {
        "id": item.id,
        "node_id": node_id("Reaction", item.id),
        "user": shapes.user(item.user),
        "content": item.content,
        "created_at": iso(item.created_at),
    }


def review(shapes: Shapes, repo: Repo, item: Review) -> dict[str, Any]:
    pull_url = f"{shapes.api}/repos/{repo.full_name}/pulls/{item.pull_number}"
    html = f"{shapes.html}/{repo.full_name}/pull/{item.pull_number}#pullrequestreview-{item.id}"
    return {
        "id": item.id,
        "node_id": node_id("PullRequestReview", item.id),
        "user": shapes.user(item.user),
        "body": item.body,
        "state": item.state,
        "html_url": html,
        "pull_request_url": pull_url,
        "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
        "submitted_at": iso(item.submitted_at),
        "commit_id": item.commit_id,
        "author_association": author_association(repo, item.user),
    }


def webhook_review(shapes: Shapes, repo: Repo, item: Review) -> dict[str, Any]:
    """The webhook spells the state in lower case ("changes_requested")."""
    return {**review(shapes, repo, item), "state": item.state.lower()}


def review_comment(shapes: Shapes, repo: Repo, item: ReviewComment) -> dict[str, Any]:
    api = f"{shapes.api}/repos/{repo.full_name}"
    url = f"{api}/pulls/comments/{item.id}"
    pull_url = f"{api}/pulls/{item.pull_number}"
    html = f"{shapes.html}/{repo.full_name}/pull/{item.pull_number}#discussion_r{item.id}"
    shape: dict[str, Any] = {
        "url": url,
        "pull_request_review_id": item.review_id,
        "id": item.id,
        "node_id": node_id("PullRequestReviewComment", item.id),
        "diff_hunk": item.diff_hunk,
        "path": item.path,
        "position": item.position,
        "original_position": item.position,
        "commit_id": item.commit_id,
        "original_commit_id": item.commit_id,
        "user": shapes.user(item.user),
        "body": item.body,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        "html_url": html,
        "pull_request_url": pull_url,
        "author_association": author_association(repo, item.user),
        "_links": {
            "self": {"href": url},
            "html": {"href": html},
            "pull_request": {"href": pull_url},
        },
        "reactions": shapes.reactions(url, item.reactions),
        "start_line": item.start_line,
        "original_start_line": item.start_line,
        "start_side": None if item.start_line is None else item.side,
        "line": item.line,
        "original_line": item.line,
        "side": item.side,
        "subject_type": "line",
    }
    if item.in_reply_to_id is not None:
        shape["in_reply_to_id"] = item.in_reply_to_id
    return shape


def diff_entry(shapes: Shapes, repo: Repo, head_sha: str, change: ChangedFile) -> dict[str, Any]:
    name = change.filename
    shape: dict[str, Any] = {
        "sha": change.sha,
        "filename": name,
        "status": change.status,
        "additions": change.additions,
        "deletions": change.deletions,
        "changes": change.additions + change.deletions,
        "blob_url": f"{shapes.html}/{repo.full_name}/blob/{head_sha}/{name}",
        "raw_url": f"{shapes.html}/{repo.full_name}/raw/{head_sha}/{name}",
        "contents_url": f"{shapes.api}/repos/{repo.full_name}/contents/{name}?ref={head_sha}",
        "patch": change.patch,
    }
    if change.previous_filename is not None:
        shape["previous_filename"] = change.previous_filename
    return shape
