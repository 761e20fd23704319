"""What each sandbox endpoint does to the world, and the webhooks GitHub would send for it.

Functions take the world, the shapes builder, the repository and the acting user, and
return (response body, hook events). No HTTP here. Behaviour follows GitHub's REST docs:
labels named in a write are created when missing; creating an issue with labels sends
`issues.opened` then one `issues.labeled` per label; removing a label the issue does not
carry is a 404 "Label does not exist".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from github_sandbox import assignees, git, issue_filters, mergeability
from github_sandbox.shapes import Shapes
from github_sandbox.state import PERMISSION_RANK, Comment, Issue, Label, Pull, Repo, User, World

_HEX_COLOR = re.compile(r"[0-9a-fA-F]{6}")
# GitHub's closing keywords ("Linking a pull request to an issue"): a pull request merged
# into the default branch closes the issues its body names with one, in this repository.
_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?:([\w.-]+)/([\w.-]+))?#(\d+)\b",
    re.IGNORECASE,
)


class SandboxError(Exception):
    """An error answer in GitHub's shape: {"message", "documentation_url", "status"}."""

    def __init__(self, status: int, message: str, *, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "message": self.message,
            "documentation_url": "https://docs.github.com/rest",
            "status": str(self.status),
        }
        if self.errors is not None:
            body["errors"] = self.errors
        return body


def not_found() -> SandboxError:
    return SandboxError(404, "Not Found")


def updated_since(query: dict[str, str]) -> float:
    """The `since` of a list's query as a timestamp: GitHub lists only what was last
    updated at or after it (ISO 8601). Absent or not a time: -inf, everything (the
    description documents no 422 for these reads)."""
    raw = query.get("since")
    try:
        return datetime.fromisoformat((raw or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("-inf")


def validation_failed(field_name: str, code: str = "invalid", **extra: Any) -> SandboxError:
    return SandboxError(
        422, "Validation Failed", errors=[{"field": field_name, "code": code, **extra}]
    )


# GitHub's limit on the body of an issue, a pull request or a comment (characters).
MAX_BODY = 65_536


def body_within_limit(body: object, resource: str) -> None:
    """GitHub's 422 for a body past MAX_BODY characters (nothing is written)."""
    if isinstance(body, str) and len(body) > MAX_BODY:
        raise SandboxError(
            422,
            "Validation Failed",
            errors=[
                {
                    "resource": resource,
                    "code": "custom",
                    "field": "body",
                    "message": f"body is too long (maximum is {MAX_BODY} characters)",
                }
            ],
        )


def refused_as_custom(resource: str, message: str) -> SandboxError:
    """GitHub's 422 for a rule of the resource rather than a field ("code": "custom")."""
    return SandboxError(
        422,
        "Validation Failed",
        errors=[{"resource": resource, "code": "custom", "message": message}],
    )


@dataclass
class HookEvent:
    event: str
    payload: dict[str, Any]


@dataclass
class Outcome:
    body: Any
    status: int = 200
    hooks: list[HookEvent] = field(default_factory=list)


class Operations:
    def __init__(self, world: World, shapes: Shapes) -> None:
        self.world = world
        self.shapes = shapes

    # -- helpers ---------------------------------------------------------------------------

    def permission(self, repo: Repo, user: User) -> str:
        if user.type == "Bot" and any(user.login == a.bot.login for a in self.world.all_apps()):
            return "write"
        if user.login.lower() == repo.owner.login.lower():
            return "admin"
        return repo.collaborators.get(user.login.lower(), "none" if repo.private else "read")

    def can_push(self, repo: Repo, user: User) -> bool:
        return PERMISSION_RANK[self.permission(repo, user)] >= PERMISSION_RANK["write"]

    def issue(self, repo: Repo, number: int) -> Issue:
        found = repo.issues.get(number)
        if found is None:
            raise not_found()
        return found

    def hook(self, repo: Repo, event: str, sender: User, **fields: Any) -> HookEvent:
        payload: dict[str, Any] = {**fields}
        payload["repository"] = self.shapes.repository(repo)
        payload["sender"] = self.shapes.user(sender)
        if repo.installation_id is not None:
            inst = self.world.installations[repo.installation_id]
            payload["installation"] = self.shapes.installation_lite(inst)
        return HookEvent(event, payload)

    def _comment_hook(
        self,
        repo: Repo,
        actor: User,
        action: str,
        issue: Issue,
        comment: dict[str, Any],
        **extra: Any,
    ) -> HookEvent:
        issue_shape = self.shapes.issue(repo, issue)
        fields = {"action": action, "issue": issue_shape, "comment": comment, **extra}
        return self.hook(repo, "issue_comment", actor, **fields)

    def _label(self, repo: Repo, name: str) -> Label:
        found = repo.labels.get(name.lower())
        if found is None:
            found = repo.labels[name.lower()] = Label(self.world.next_id(), name)
        return found

    def touch(self, issue: Issue) -> None:
        issue.updated_at = self.world.now()

    # -- issues ----------------------------------------------------------------------------

    def create_issue(self, repo: Repo, actor: User, data: dict[str, Any]) -> Outcome:
        title = data.get("title")
        if not isinstance(title, str | int) or not str(title).strip():
            raise validation_failed("title", "missing_field", resource="Issue")
        body = data.get("body")
        if body is not None and not isinstance(body, str):
            raise validation_failed("body", resource="Issue")
        body_within_limit(body, "Issue")
        labels = _label_names(data.get("labels", []))
        assigned = assignees.requested(self, repo, data)
        now = self.world.now()
        issue = Issue(
            id=self.world.next_id(),
            number=repo.next_number,
            title=str(title),
            body=body,
            user=actor,
            created_at=now,
            updated_at=now,
        )
        repo.next_number += 1
        repo.issues[issue.number] = issue
        hooks = [
            self.hook(repo, "issues", actor, action="opened", issue=self.shapes.issue(repo, issue))
        ]
        # GitHub drops labels silently for users without push access.
        if self.can_push(repo, actor):
            hooks += self._attach(repo, issue, actor, labels)
        hooks += assignees.assign(self, repo, issue, actor, assigned)
        return Outcome(self.shapes.issue(repo, issue), 201, hooks)

    def _attach(self, repo: Repo, issue: Issue, actor: User, names: list[str]) -> list[HookEvent]:
        hooks = []
        for name in names:
            label = self._label(repo, name)
            if label.name not in issue.labels:
                issue.labels.append(label.name)
                self.touch(issue)
                hooks.append(self._labeled(repo, issue, actor, "labeled", label))
        return hooks

    def _labeled(
        self, repo: Repo, issue: Issue, actor: User, action: str, label: Label
    ) -> HookEvent:
        if issue.is_pull:
            return self.hook(
                repo,
                "pull_request",
                actor,
                action=action,
                number=issue.number,
                pull_request=self.shapes.pull(repo, repo.pulls[issue.number]),
                label=self.shapes.label(repo, label),
            )
        return self.hook(
            repo,
            "issues",
            actor,
            action=action,
            issue=self.shapes.issue(repo, issue),
            label=self.shapes.label(repo, label),
        )

    def get_issue(self, repo: Repo, number: int) -> Outcome:
        return Outcome(self.shapes.issue(repo, self.issue(repo, number)))

    def list_issues(self, repo: Repo, query: dict[str, str]) -> list[dict[str, Any]]:
        keep = issue_filters.kept(repo, query, updated_since(query))
        issues = [issue for issue in repo.issues.values() if keep(issue)]
        key = (lambda i: i.updated_at) if query.get("sort") == "updated" else (lambda i: i.id)
        issues.sort(key=key, reverse=query.get("direction", "desc") != "asc")
        return [self.shapes.issue(repo, issue) for issue in issues]

    def update_issue(self, repo: Repo, actor: User, number: int, data: dict[str, Any]) -> Outcome:
        issue = self.issue(repo, number)
        body_within_limit(data.get("body"), "Issue")
        assigned = assignees.requested(self, repo, data)
        hooks: list[HookEvent] = []
        changes: dict[str, Any] = {}
        for key in ("title", "body"):
            if key in data and data[key] != getattr(issue, key):
                changes[key] = {"from": getattr(issue, key) or ""}
                setattr(issue, key, data[key])
        if changes:
            self.touch(issue)
            hooks.append(
                self.hook(
                    repo,
                    "issues",
                    actor,
                    action="edited",
                    issue=self.shapes.issue(repo, issue),
                    changes=changes,
                )
            )
        state = data.get("state")
        if state is not None and state not in ("open", "closed"):
            raise validation_failed("state", resource="Issue")
        if state is not None and state != issue.state:
            issue.state = state
            issue.closed_at = self.world.now() if state == "closed" else None
            issue.state_reason = data.get("state_reason") or (
                "completed" if state == "closed" else "reopened"
            )
            self.touch(issue)
            action = "closed" if state == "closed" else "reopened"
            hooks.append(
                self.hook(
                    repo, "issues", actor, action=action, issue=self.shapes.issue(repo, issue)
                )
            )
        hooks += assignees.assign(self, repo, issue, actor, assigned)
        return Outcome(self.shapes.issue(repo, issue), 200, hooks)

    # -- labels ----------------------------------------------------------------------------

    def add_labels(self, repo: Repo, actor: User, number: int, data: Any) -> Outcome:
        issue = self.issue(repo, number)
        raw = data.get("labels") if isinstance(data, dict) else data
        if not isinstance(raw, list) or not raw:
            raise validation_failed("labels", "missing_field", resource="Label")
        if not self.can_push(repo, actor):
            raise SandboxError(403, "Must have push access to repository")
        hooks = self._attach(repo, issue, actor, _label_names(raw))
        return Outcome(self.issue_labels(repo, issue), 200, hooks)

    def issue_labels(self, repo: Repo, issue: Issue) -> list[dict[str, Any]]:
        return [self.shapes.label(repo, repo.labels[name.lower()]) for name in issue.labels]

    def remove_label(self, repo: Repo, actor: User, number: int, name: str) -> Outcome:
        issue = self.issue(repo, number)
        if not self.can_push(repo, actor):
            raise SandboxError(403, "Must have push access to repository")
        carried = next((n for n in issue.labels if n.lower() == name.lower()), None)
        if carried is None:
            raise SandboxError(404, "Label does not exist")
        issue.labels.remove(carried)
        self.touch(issue)
        hook = self._labeled(repo, issue, actor, "unlabeled", repo.labels[carried.lower()])
        return Outcome(self.issue_labels(repo, issue), 200, [hook])

    # -- comments --------------------------------------------------------------------------

    def create_comment(self, repo: Repo, actor: User, number: int, data: dict[str, Any]) -> Outcome:
        issue = self.issue(repo, number)
        body = data.get("body")
        if not isinstance(body, str) or not body:
            raise validation_failed("body", "missing_field", resource="IssueComment")
        body_within_limit(body, "IssueComment")
        now = self.world.now()
        comment = Comment(self.world.next_id(), issue.number, actor, body, now, now)
        repo.comments[comment.id] = comment
        issue.comment_ids.append(comment.id)
        self.touch(issue)
        shaped = self.shapes.comment(repo, comment)
        return Outcome(shaped, 201, [self._comment_hook(repo, actor, "created", issue, shaped)])

    def comment(self, repo: Repo, comment_id: int) -> Comment:
        found = repo.comments.get(comment_id)
        if found is None:
            raise not_found()
        return found

    def update_comment(
        self, repo: Repo, actor: User, comment_id: int, data: dict[str, Any]
    ) -> Outcome:
        comment = self.comment(repo, comment_id)
        body = data.get("body")
        if not isinstance(body, str) or not body:
            raise validation_failed("body", "missing_field", resource="IssueComment")
        body_within_limit(body, "IssueComment")
        if comment.user.id != actor.id and not self.can_push(repo, actor):
            raise SandboxError(403, "Resource not accessible by integration")
        previous = comment.body
        comment.body = body
        comment.updated_at = self.world.now()
        shaped = self.shapes.comment(repo, comment)
        issue = repo.issues[comment.issue_number]
        hooks = []
        if previous != body:
            changes = {"body": {"from": previous}}
            hooks.append(self._comment_hook(repo, actor, "edited", issue, shaped, changes=changes))
        return Outcome(shaped, 200, hooks)

    def list_comments(
        self, repo: Repo, number: int, query: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        issue = self.issue(repo, number)
        since = updated_since(query or {})
        found = [repo.comments[i] for i in issue.comment_ids]
        return [self.shapes.comment(repo, c) for c in found if c.updated_at >= since]

    def delete_comment(self, repo: Repo, actor: User, comment_id: int) -> Outcome:
        comment = self.comment(repo, comment_id)
        if comment.user.id != actor.id and not self.can_push(repo, actor):
            raise SandboxError(403, "Resource not accessible by integration")
        issue = repo.issues[comment.issue_number]
        shaped = self.shapes.comment(repo, comment)
        del repo.comments[comment_id]
        issue.comment_ids.remove(comment_id)
        return Outcome(None, 204, [self._comment_hook(repo, actor, "deleted", issue, shaped)])

    def create_label(self, repo: Repo, actor: User, data: dict[str, Any]) -> Outcome:
        """A repository label; a name that exists (case-insensitively) is GitHub's 422
        `already_exists`."""
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise validation_failed("name", "missing_field", resource="Label")
        if name.strip().lower() in repo.labels:
            raise validation_failed("name", "already_exists", resource="Label")
        color = data.get("color", "ededed")
        description = data.get("description")
        if not isinstance(color, str) or not _HEX_COLOR.fullmatch(color.removeprefix("#")):
            raise validation_failed("color", resource="Label")
        if description is not None and (not isinstance(description, str) or len(description) > 100):
            raise validation_failed("description", resource="Label")
        label = Label(self.world.next_id(), name.strip(), color.removeprefix("#"), description)
        repo.labels[label.name.lower()] = label
        shaped = self.shapes.label(repo, label)
        return Outcome(
            shaped, 201, [self.hook(repo, "label", actor, action="created", label=shaped)]
        )

    # -- pull requests ---------------------------------------------------------------------

    def create_pull(self, repo: Repo, actor: User, data: dict[str, Any]) -> Outcome:
        for key in ("title", "head", "base"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise validation_failed(key, "missing_field", resource="PullRequest")
        body_within_limit(data.get("body"), "PullRequest")
        head = str(data["head"]).split(":", 1)[-1]
        base = str(data["base"])
        if repo.git_path is None:
            raise validation_failed("head", resource="PullRequest")
        head_sha = git.branch_sha(repo.git_path, head)
        base_sha = git.branch_sha(repo.git_path, base)
        if base_sha is None:
            raise validation_failed("base", resource="PullRequest")
        if head_sha is None:
            raise validation_failed("head", resource="PullRequest")
        if head_sha == base_sha:
            raise refused_as_custom("PullRequest", f"No commits between {base} and {head}")
        for pull in repo.pulls.values():
            if (
                pull.head_ref == head
                and pull.base_ref == base
                and repo.issues[pull.number].state == "open"
            ):
                raise refused_as_custom(
                    "PullRequest", f"A pull request already exists for {repo.owner.login}:{head}."
                )
        created = self.create_issue(repo, actor, {"title": data["title"], "body": data.get("body")})
        issue = repo.issues[created.body["number"]]
        issue.is_pull = True
        pull = Pull(
            self.world.next_id(),
            issue.number,
            head,
            head_sha,
            base,
            base_sha,
            draft=bool(data.get("draft", False)),
        )
        repo.pulls[issue.number] = pull
        shaped = self.shapes.pull(repo, pull)
        hook = self.hook(
            repo, "pull_request", actor, action="opened", number=pull.number, pull_request=shaped
        )
        return Outcome(shaped, 201, [hook])

    def pull(self, repo: Repo, number: int) -> Pull:
        found = repo.pulls.get(number)
        if found is None:
            raise not_found()
        return found

    def list_pulls(self, repo: Repo, query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        head = query.get("head")
        base = query.get("base")
        found = []
        for pull in sorted(repo.pulls.values(), key=lambda p: p.id, reverse=True):
            issue = repo.issues[pull.number]
            if state != "all" and issue.state != state:
                continue
            if head is not None and head.lower() != f"{repo.owner.login}:{pull.head_ref}".lower():
                continue
            if base is not None and base != pull.base_ref:
                continue
            found.append(self.shapes.pull(repo, pull))
        return found

    def close_pull(self, repo: Repo, actor: User, number: int, *, merge: bool) -> Outcome:
        pull = self.pull(repo, number)
        issue = repo.issues[number]
        if issue.state == "closed":
            return Outcome(self.shapes.pull(repo, pull))
        now = self.world.now()
        if merge:
            pull.merge_commit_sha = self._land(repo, pull, issue.title)
            pull.merged_at = now
            pull.merged_by = actor
        issue.state = "closed"
        issue.closed_at = now
        issue.state_reason = "completed"
        self.touch(issue)
        shaped = self.shapes.pull(repo, pull)
        hook = self.hook(
            repo, "pull_request", actor, action="closed", number=number, pull_request=shaped
        )
        hooks = [hook]
        if merge and pull.base_ref == repo.default_branch:
            for linked in self._closed_by(repo, issue.body or ""):
                closing = {"state": "closed", "state_reason": "completed"}
                hooks.extend(self.update_issue(repo, actor, linked, closing).hooks)
        return Outcome(shaped, 200, hooks)

    def _land(self, repo: Repo, pull: Pull, title: str) -> str:
        """The base branch takes the head: by fast-forward when it has nothing the head
        lacks (the sandbox's shortcut: GitHub's merge method would add a merge commit),
        else by a merge commit; the commit the base is at then. A head that conflicts with
        the base is refused as GitHub refuses it (405)."""
        if repo.git_path is None:
            return pull.head_sha
        check = mergeability.fresh(repo, pull)
        if check is None or check.conflicted:
            raise SandboxError(405, "Pull Request is not mergeable")
        pull.head_sha = check.head
        if git.fast_forward(repo.git_path, pull.base_ref, check.head):
            return check.head
        message = f"Merge pull request #{pull.number} from {repo.owner.login}/{pull.head_ref}"
        return git.merge_commit(repo.git_path, pull.base_ref, check, f"{message}\n\n{title}")

    def reopen_pull(self, repo: Repo, actor: User, number: int) -> Outcome:
        """`PATCH .../pulls/N` with `state: open`: a pull request closed without a merge opens
        again (`pull_request` `reopened`); a merged one cannot, as on GitHub (422)."""
        pull = self.pull(repo, number)
        issue = repo.issues[number]
        if pull.merged_at is not None:
            raise refused_as_custom(
                "PullRequest", "state cannot be changed. The pull request cannot be reopened."
            )
        if issue.state == "open":
            return Outcome(self.shapes.pull(repo, pull))
        issue.state, issue.closed_at, issue.state_reason = "open", None, "reopened"
        self.touch(issue)
        shaped = self.shapes.pull(repo, pull)
        hook = self.hook(
            repo, "pull_request", actor, action="reopened", number=number, pull_request=shaped
        )
        return Outcome(shaped, 200, [hook])

    def _closed_by(self, repo: Repo, body: str) -> list[int]:
        """The open issues of `repo` (not pull requests) a closing keyword names in `body`."""
        found: list[int] = []
        for owner, name, number in _CLOSING.findall(body):
            same = not owner or f"{owner}/{name}".lower() == repo.full_name.lower()
            linked = repo.issues.get(int(number))
            if (
                same
                and linked is not None
                and linked.state == "open"
                and int(number) not in repo.pulls
                and int(number) not in found
            ):
                found.append(int(number))
        return found

    def collaborator_permission(self, repo: Repo, username: str) -> Outcome:
        user = self.world.users.get(username.lower())
        if user is None:
            raise not_found()
        permission = self.permission(repo, user)
        legacy = {"maintain": "write", "triage": "read"}.get(permission, permission)
        return Outcome(
            {
                "permission": legacy,
                "role_name": permission,
                "user": self.shapes.collaborator(user, permission),
            }
        )


def _label_names(raw: Any) -> list[str]:
    if not isinstance(raw, list):
        raise validation_failed("labels", resource="Label")
    names = []
    for item in raw:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise validation_failed("labels", resource="Label")
        names.append(name.strip())
    return names
