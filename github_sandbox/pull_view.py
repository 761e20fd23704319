"""What the pull request page shows after the pull request opens: review threads, the
head commit's checks and statuses, and the forms' tokens (`pull_forms` checks them)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from github_sandbox.ci_ops import Checks
from github_sandbox.review_ops import Reviews
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Pull, Repo, iso

FORM_ACTIONS = ("review", "fail-check", "merge")


def form_token(sandbox: Sandbox, repo: str, number: int, action: str) -> str:
    """Proof that a post came from the sandbox's own page (another site cannot read it)."""
    message = f"{repo.lower()}#{number}:{action}".encode()
    return hmac.new(sandbox.url_secret, message, hashlib.sha256).hexdigest()


def after_pr_view(sandbox: Sandbox, repo: Repo, pull: Pull) -> dict[str, Any]:
    reviews = Reviews(sandbox.ops)
    checks = Checks(sandbox.ops)
    head = reviews.head_sha(repo, pull)
    threads: dict[int, dict[str, Any]] = {}
    for comment in sorted(repo.review_comments.values(), key=lambda c: c.id):
        if comment.pull_number != pull.number:
            continue
        review = repo.reviews.get(comment.review_id)
        if review is None or review.state == "PENDING":
            continue
        root = comment.in_reply_to_id or comment.id
        thread = threads.setdefault(
            root, {"id": root, "path": comment.path, "line": comment.line, "comments": []}
        )
        thread["comments"].append(
            {"id": comment.id, "author": comment.user.login, "body": comment.body}
        )
    submitted = [
        {"id": r.id, "author": r.user.login, "state": r.state, "body": r.body or ""}
        for r in sorted(repo.reviews.values(), key=lambda r: r.id)
        if r.pull_number == pull.number and r.state != "PENDING" and r.body
    ]
    runs = [
        {"name": r.name, "status": r.status, "conclusion": r.conclusion, "summary": r.summary}
        for r in sorted(repo.check_runs.values(), key=lambda r: -r.id)
        if r.head_sha == head
    ]
    statuses = [
        {"context": s.context, "state": s.state, "description": s.description or ""}
        for s in checks.latest_statuses(repo, head)
    ]
    files = [f.filename for f in reviews.files(repo, pull) if f.status != "removed"]
    return {
        "head_sha": head,
        "threads": list(threads.values()),
        "reviews": submitted,
        "check_runs": runs,
        "statuses": statuses,
        "files": files,
        "owner_login": repo.owner.login,
        "open": repo.issues[pull.number].state == "open",
        "tokens": {
            action.replace("-", "_"): form_token(sandbox, repo.full_name, pull.number, action)
            for action in FORM_ACTIONS
        },
        "updated": iso(sandbox.clock()),
    }
