"""What reviews, review comments, reactions, pull request files, reviewers and merges do to
the world, and the webhooks GitHub sends for them. No HTTP here (as `operations`).

Behaviour follows GitHub's REST docs: a review with an `event` is submitted at once
(`pull_request_review.submitted`, after one `pull_request_review_comment.created` per
comment); without one it stays PENDING and sends nothing. A single review comment (or a
reply, `in_reply_to`) is a review of its own in state COMMENTED, as on GitHub. A comment must
sit on a line the diff shows. Nobody may approve or request changes on their own pull request.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from github_sandbox import git
from github_sandbox.operations import (
    HookEvent,
    Operations,
    Outcome,
    SandboxError,
    body_within_limit,
    not_found,
    refused_as_custom,
    updated_since,
    validation_failed,
)
from github_sandbox.review_shapes import (
    REACTION_CONTENTS,
    diff_entry,
    reaction,
    review,
    review_comment,
    simple_pull,
    webhook_review,
)
from github_sandbox.state import Pull, Reaction, Repo, Review, ReviewComment, User

REVIEW_STATES = {
    "APPROVE": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
}
SIDES = ("LEFT", "RIGHT")
MERGE_METHODS = ("merge", "squash", "rebase")


class Reviews:
    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.world = ops.world
        self.shapes = ops.shapes

    # -- helpers ---------------------------------------------------------------------------

    def head_sha(self, repo: Repo, pull: Pull) -> str:
        """The head branch's commit now (a push moves it), else the one the PR opened at."""
        if repo.git_path is not None and repo.issues[pull.number].state == "open":
            return git.branch_sha(repo.git_path, pull.head_ref) or pull.head_sha
        return pull.head_sha

    def files(self, repo: Repo, pull: Pull, at: str | None = None) -> list[git.ChangedFile]:
        """What the pull request changes up to its head (or its commit `at`)."""
        if repo.git_path is None:
            return []
        return git.changed_files(repo.git_path, pull.base_sha, at or self.head_sha(repo, pull))

    def pull_commit(self, repo: Repo, pull: Pull, commit_id: str) -> str:
        """`commit_id` when it is one of the pull request's commits; else GitHub's 422
        (`code: custom`, "commit_id is not part of the pull request")."""
        head = self.head_sha(repo, pull)
        commits = (
            [head]
            if repo.git_path is None
            else git.commits_between(repo.git_path, pull.base_sha, head)
        )
        if commit_id not in commits:
            raise SandboxError(
                422,
                "Validation Failed",
                errors=[
                    {
                        "resource": "PullRequestReviewComment",
                        "code": "custom",
                        "field": "commit_id",
                        "message": "commit_id is not part of the pull request",
                    }
                ],
            )
        return commit_id

    def _pull_hook(
        self, repo: Repo, event: str, actor: User, pull: Pull, **fields: Any
    ) -> HookEvent:
        shaped = simple_pull(self.shapes, repo, pull)
        return self.ops.hook(repo, event, actor, pull_request=shaped, **fields)

    def review_comment(self, repo: Repo, comment_id: int) -> ReviewComment:
        found = repo.review_comments.get(comment_id)
        if found is None:
            raise not_found()
        return found

    def _placed(
        self,
        repo: Repo,
        pull: Pull,
        actor: User,
        review_id: int,
        spec: dict[str, Any],
        commit: str | None = None,
    ) -> ReviewComment:
        """A new comment at `spec`'s path and line, checked against the diff up to
        `commit` (one of the pull request's commits; its head when None)."""
        body, path, line = spec.get("body"), spec.get("path"), spec.get("line")
        if not isinstance(body, str) or not body:
            raise validation_failed("body", "missing_field", resource="PullRequestReviewComment")
        if not isinstance(path, str) or not path:
            raise validation_failed("path", "missing_field", resource="PullRequestReviewComment")
        if not isinstance(line, int) or isinstance(line, bool) or line < 1:
            # `position` is closing down (GitHub's description); the sandbox takes lines only.
            raise validation_failed("line", "missing_field", resource="PullRequestReviewComment")
        side = spec.get("side", "RIGHT")
        start_line = spec.get("start_line")
        if side not in SIDES:
            raise validation_failed("side", resource="PullRequestReviewComment")
        if start_line is not None and (not isinstance(start_line, int) or start_line > line):
            raise validation_failed("start_line", resource="PullRequestReviewComment")
        commit = commit or self.head_sha(repo, pull)
        change = next((f for f in self.files(repo, pull, commit) if f.filename == path), None)
        placed = None if change is None else git.hunk_through(change.patch, line, side)
        if placed is None:
            raise refused_as_custom(
                "PullRequestReviewComment",
                "pull_request_review_thread.line must be part of the diff",
            )
        now = self.world.now()
        return ReviewComment(
            id=self.world.next_id(),
            pull_number=pull.number,
            review_id=review_id,
            user=actor,
            body=body,
            path=path,
            line=line,
            side=side,
            commit_id=commit,
            diff_hunk=placed[0],
            position=placed[1],
            created_at=now,
            updated_at=now,
            start_line=start_line,
        )

    def _comment_created(
        self, repo: Repo, actor: User, pull: Pull, item: ReviewComment
    ) -> HookEvent:
        shaped = review_comment(self.shapes, repo, item)
        return self._pull_hook(
            repo, "pull_request_review_comment", actor, pull, action="created", comment=shaped
        )

    def _submitted(self, repo: Repo, actor: User, pull: Pull, item: Review) -> HookEvent:
        shaped = webhook_review(self.shapes, repo, item)
        return self._pull_hook(
            repo, "pull_request_review", actor, pull, action="submitted", review=shaped
        )

    def _new_review(
        self, repo: Repo, pull: Pull, actor: User, body: str | None, state: str
    ) -> Review:
        return Review(
            id=self.world.next_id(),
            pull_number=pull.number,
            user=actor,
            body=body,
            state=state,
            commit_id=self.head_sha(repo, pull),
            submitted_at=self.world.now(),
        )

    def synchronize(self, repo: Repo, pusher: User) -> list[HookEvent]:
        """After a push: each open pull request whose head branch moved takes the new
        head (`pull_request.synchronize`, with `before` and `after`)."""
        hooks = []
        for pull in sorted(repo.pulls.values(), key=lambda p: p.number):
            before = pull.head_sha
            after = self.head_sha(repo, pull)
            if after == before or repo.issues[pull.number].state != "open":
                continue
            pull.head_sha = after
            self.ops.touch(repo.issues[pull.number])
            hooks.append(
                self.ops.hook(
                    repo,
                    "pull_request",
                    pusher,
                    action="synchronize",
                    number=pull.number,
                    before=before,
                    after=after,
                    pull_request=self.shapes.pull(repo, pull),
                )
            )
        return hooks

    # -- reviews ---------------------------------------------------------------------------

    def create_review(self, repo: Repo, actor: User, number: int, data: Any) -> Outcome:
        """GitHub answers this operation's 422s in the simple form: `errors` are strings."""
        try:
            return self._create_review(repo, actor, number, data)
        except SandboxError as exc:
            if exc.status != 422:
                raise
            reasons = [
                str(e.get("message") or f"{e.get('field')} is {e.get('code')}")
                for e in exc.errors or []
            ]
            raise SandboxError(
                422, "Unprocessable Entity", errors=reasons or [exc.message]
            ) from exc

    def _create_review(self, repo: Repo, actor: User, number: int, data: Any) -> Outcome:
        pull = self.ops.pull(repo, number)
        if not isinstance(data, dict):
            raise SandboxError(400, "Problems parsing JSON")
        event = data.get("event")
        body = data.get("body")
        specs = data.get("comments", [])
        if event is not None and event not in REVIEW_STATES:
            raise validation_failed("event", resource="PullRequestReview")
        if body is not None and not isinstance(body, str):
            raise validation_failed("body", resource="PullRequestReview")
        if event in ("REQUEST_CHANGES", "COMMENT") and not body and not specs:
            raise SandboxError(422, f"Body is required for {event}")
        if event in ("APPROVE", "REQUEST_CHANGES") and actor.id == repo.issues[number].user.id:
            verb = "approve" if event == "APPROVE" else "request changes on"
            raise SandboxError(422, f"Can not {verb} your own pull request")
        if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
            raise validation_failed("comments", resource="PullRequestReview")
        if repo.issues[number].state != "open":
            raise SandboxError(422, "The pull request is closed")
        state = REVIEW_STATES[event] if event is not None else "PENDING"
        if state == "PENDING" and any(
            r.pull_number == number and r.state == "PENDING" and r.user.id == actor.id
            for r in repo.reviews.values()
        ):
            raise SandboxError(422, "User can only have one pending review per pull request")
        item = self._new_review(repo, pull, actor, body or "", state)
        comments = [self._placed(repo, pull, actor, item.id, spec) for spec in specs]
        repo.reviews[item.id] = item
        if state != "PENDING" and actor in pull.requested_reviewers:
            pull.requested_reviewers.remove(actor)  # a review answers the request
        for comment in comments:
            repo.review_comments[comment.id] = comment
            item.comment_ids.append(comment.id)
        hooks: list[HookEvent] = []
        if state != "PENDING":
            hooks = [self._comment_created(repo, actor, pull, c) for c in comments]
            hooks.append(self._submitted(repo, actor, pull, item))
        return Outcome(review(self.shapes, repo, item), 200, hooks)

    def visible_reviews(self, repo: Repo, number: int, viewer: User) -> list[Review]:
        """A pending review is its author's alone until submitted."""
        self.ops.pull(repo, number)
        return [
            r
            for r in sorted(repo.reviews.values(), key=lambda r: r.id)
            if r.pull_number == number and (r.state != "PENDING" or r.user.id == viewer.id)
        ]

    def list_reviews(self, repo: Repo, number: int, viewer: User) -> list[dict[str, Any]]:
        return [review(self.shapes, repo, r) for r in self.visible_reviews(repo, number, viewer)]

    def dismiss_review(
        self, repo: Repo, actor: User, number: int, review_id: int, message: str
    ) -> Outcome:
        """GitHub's "Dismiss a review for a pull request" (`PUT .../reviews/{id}/dismissals`,
        served on the control API: the trimmed description has no such operation). Only a
        writer dismisses, only an approval or a change request (GitHub answers 422 "Can not
        dismiss a commented pull request review"), and a message is required. The review's
        state becomes DISMISSED and `pull_request_review.dismissed` is sent."""
        pull = self.ops.pull(repo, number)
        item = repo.reviews.get(review_id)
        if item is None or item.pull_number != number:
            raise not_found()
        if not self.ops.can_push(repo, actor):
            raise SandboxError(403, "Must have push access to dismiss a review")
        if not message:
            raise validation_failed("message", resource="PullRequestReview")
        if item.state not in ("APPROVED", "CHANGES_REQUESTED"):
            raise SandboxError(422, f"Can not dismiss a {item.state.lower()} pull request review")
        item.state = "DISMISSED"
        shaped = webhook_review(self.shapes, repo, item)
        hook = self._pull_hook(
            repo, "pull_request_review", actor, pull, action="dismissed", review=shaped
        )
        return Outcome(review(self.shapes, repo, item), 200, [hook])

    def list_comments_for_review(
        self, repo: Repo, number: int, review_id: int, viewer: User
    ) -> list[dict[str, Any]]:
        found = next(
            (r for r in self.visible_reviews(repo, number, viewer) if r.id == review_id), None
        )
        if found is None:
            raise not_found()
        return [
            review_comment(self.shapes, repo, repo.review_comments[cid])
            for cid in found.comment_ids
            if cid in repo.review_comments
        ]

    # -- review comments -------------------------------------------------------------------

    def list_review_comments(
        self, repo: Repo, number: int, viewer: User, query: dict[str, str]
    ) -> list[dict[str, Any]]:
        visible = {r.id for r in self.visible_reviews(repo, number, viewer)}
        since = updated_since(query)
        found = [
            c
            for c in repo.review_comments.values()
            if c.review_id in visible and c.updated_at >= since
        ]
        newest_first = query.get("direction", "asc") == "desc"
        key = (lambda c: c.updated_at) if query.get("sort") == "updated" else (lambda c: c.id)
        found.sort(key=key, reverse=newest_first)
        return [review_comment(self.shapes, repo, c) for c in found]

    def create_review_comment(self, repo: Repo, actor: User, number: int, data: Any) -> Outcome:
        pull = self.ops.pull(repo, number)
        if not isinstance(data, dict):
            raise SandboxError(400, "Problems parsing JSON")
        if repo.issues[number].state != "open":
            raise refused_as_custom("PullRequestReviewComment", "The pull request is closed")
        replied = data.get("in_reply_to")
        if replied is not None:
            if not isinstance(replied, int) or isinstance(replied, bool):
                raise validation_failed("in_reply_to", resource="PullRequestReviewComment")
            return self.reply(repo, actor, number, replied, data)
        commit_id = data.get("commit_id")
        if not isinstance(commit_id, str) or not commit_id:
            raise validation_failed(
                "commit_id", "missing_field", resource="PullRequestReviewComment"
            )
        commit = self.pull_commit(repo, pull, commit_id)
        item = self._new_review(repo, pull, actor, "", "COMMENTED")
        comment = self._placed(repo, pull, actor, item.id, data, commit)
        return self._single(repo, actor, pull, item, comment)

    def reply(self, repo: Repo, actor: User, number: int, comment_id: int, data: Any) -> Outcome:
        """A reply joins the thread of `comment_id` (the thread's first comment, as GitHub
        names it even when a reply is answered)."""
        pull = self.ops.pull(repo, number)
        if not isinstance(data, dict):
            raise SandboxError(400, "Problems parsing JSON")
        target = self.review_comment(repo, comment_id)
        if target.pull_number != number:
            raise not_found()
        body = data.get("body")
        if not isinstance(body, str) or not body:
            raise validation_failed("body", "missing_field", resource="PullRequestReviewComment")
        body_within_limit(body, "PullRequestReviewComment")
        root = target.in_reply_to_id or target.id
        item = self._new_review(repo, pull, actor, "", "COMMENTED")
        now = self.world.now()
        # A reply sits where its thread does: the same file, line and diff hunk.
        comment = replace(
            target,
            id=self.world.next_id(),
            review_id=item.id,
            user=actor,
            body=body,
            created_at=now,
            updated_at=now,
            in_reply_to_id=root,
            reactions=[],
        )
        return self._single(repo, actor, pull, item, comment)

    def _single(
        self, repo: Repo, actor: User, pull: Pull, item: Review, comment: ReviewComment
    ) -> Outcome:
        repo.reviews[item.id] = item
        repo.review_comments[comment.id] = comment
        item.comment_ids.append(comment.id)
        hooks = [
            self._comment_created(repo, actor, pull, comment),
            self._submitted(repo, actor, pull, item),
        ]
        return Outcome(review_comment(self.shapes, repo, comment), 201, hooks)

    # -- reactions -------------------------------------------------------------------------

    def react(self, reactions: list[Reaction], actor: User, data: Any) -> Outcome:
        """One reaction of each kind per person: a second is GitHub's 200 with the first."""
        content = data.get("content") if isinstance(data, dict) else None
        if content not in REACTION_CONTENTS:
            raise validation_failed("content", resource="Reaction")
        existing = next(
            (r for r in reactions if r.user.id == actor.id and r.content == content), None
        )
        if existing is not None:
            return Outcome(reaction(self.shapes, existing), 200)
        created = Reaction(self.world.next_id(), actor, str(content), self.world.now())
        reactions.append(created)
        return Outcome(reaction(self.shapes, created), 201)

    # -- files, reviewers, merge -----------------------------------------------------------

    def list_files(self, repo: Repo, number: int) -> list[dict[str, Any]]:
        pull = self.ops.pull(repo, number)
        head = self.head_sha(repo, pull)
        return [diff_entry(self.shapes, repo, head, f) for f in self.files(repo, pull)]

    def request_reviewers(self, repo: Repo, actor: User, number: int, data: Any) -> Outcome:
        pull = self.ops.pull(repo, number)
        logins = data.get("reviewers", []) if isinstance(data, dict) else None
        teams = data.get("team_reviewers", []) if isinstance(data, dict) else None
        if not isinstance(logins, list) or not all(isinstance(x, str) for x in logins):
            raise validation_failed("reviewers", resource="PullRequest")
        if teams:  # the sandbox has no teams
            raise refused_as_custom(
                "PullRequest", "Reviews may only be requested from collaborators."
            )
        if not self.ops.can_push(repo, actor):
            raise SandboxError(403, "Must have push access to request reviewers")
        hooks = []
        for login in logins:
            user = self.world.users.get(login.lower())
            if user is None or self.ops.permission(repo, user) == "none":
                raise refused_as_custom(
                    "PullRequest", "Reviews may only be requested from collaborators."
                )
            if user.id == repo.issues[number].user.id:
                raise refused_as_custom(
                    "PullRequest", "Review cannot be requested from pull request author."
                )
            if user not in pull.requested_reviewers:
                pull.requested_reviewers.append(user)
                hooks.append(
                    self.ops.hook(
                        repo,
                        "pull_request",
                        actor,
                        action="review_requested",
                        number=number,
                        pull_request=self.shapes.pull(repo, pull),
                        requested_reviewer=self.shapes.user(user),
                    )
                )
        return Outcome(self.shapes.pull(repo, pull), 201, hooks)

    def merge(self, repo: Repo, actor: User, number: int, data: Any) -> Outcome:
        pull = self.ops.pull(repo, number)
        data = data if isinstance(data, dict) else {}
        method = data.get("merge_method", "merge")
        if method not in MERGE_METHODS:
            raise validation_failed("merge_method", resource="PullRequest")
        if not self.ops.can_push(repo, actor):
            raise SandboxError(403, "Must have push access to merge")
        issue = repo.issues[number]
        if issue.state != "open" or pull.draft:
            raise SandboxError(405, "Pull Request is not mergeable")
        head = self.head_sha(repo, pull)
        wanted = data.get("sha")
        if wanted is not None and wanted != head:
            raise SandboxError(409, "Head branch was modified. Review and try the merge again.")
        pull.head_sha = head
        # A head that conflicts with the base is refused there (405, Operations._land).
        outcome = self.ops.close_pull(repo, actor, number, merge=True)
        landed = pull.merge_commit_sha or head
        answer = {"sha": landed, "merged": True, "message": "Pull Request successfully merged"}
        return Outcome(answer, 200, outcome.hooks)
