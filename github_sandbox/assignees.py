"""Who an issue is assigned to, as `issues/create` and `issues/update` set it (`assignees`,
and the older single `assignee`). GitHub takes only users who may be assigned (here: the
repository's owner and its collaborators; anyone else is 422 naming the login), at most
10; it drops them silently when the caller has no push access, as it drops labels. Each
change sends `issues.assigned` or `issues.unassigned` naming the user."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The module, not its names: `operations` calls this module, and the names are read when a
# request is served, after both modules are loaded.
from github_sandbox import operations
from github_sandbox.state import Issue, Repo, User

if TYPE_CHECKING:
    from github_sandbox.operations import HookEvent, Operations

MAX_ASSIGNEES = 10  # GitHub's limit per issue


def requested(ops: Operations, repo: Repo, data: dict[str, Any]) -> list[User] | None:
    """The assignees a create or update asks for (None: it names none, nothing changes);
    checked whole before anything is written."""
    if "assignees" not in data and "assignee" not in data:
        return None
    many, one = data.get("assignees") or [], data.get("assignee")
    if not isinstance(many, list) or not all(isinstance(login, str) for login in many):
        raise operations.validation_failed("assignees", resource="Issue")
    if one is not None and not isinstance(one, str):
        raise operations.validation_failed("assignee", resource="Issue")
    logins = list(dict.fromkeys(login.lower() for login in [*many, *([one] if one else [])]))
    if len(logins) > MAX_ASSIGNEES:
        raise operations.validation_failed("assignees", resource="Issue")
    for login in logins:
        if login != repo.owner.login.lower() and login not in repo.collaborators:
            raise operations.SandboxError(
                422,
                "Validation Failed",
                errors=[
                    {"value": login, "resource": "Issue", "field": "assignees", "code": "invalid"}
                ],
            )
    return [ops.world.user(login) for login in logins]


def assign(
    ops: Operations, repo: Repo, issue: Issue, actor: User, users: list[User] | None
) -> list[HookEvent]:
    """Set the issue's assignees to `users` (a caller without push access changes
    nothing); the webhooks, unassignments first."""
    if users is None or not ops.can_push(repo, actor):
        return []
    wanted = {user.id for user in users}
    held = {user.id for user in issue.assignees}
    removed = [user for user in issue.assignees if user.id not in wanted]
    added = [user for user in users if user.id not in held]
    issue.assignees = list(users)
    if not removed and not added:
        return []
    ops.touch(issue)
    shaped = ops.shapes.issue(repo, issue)
    return [
        ops.hook(repo, "issues", actor, action=action, issue=shaped, assignee=ops.shapes.user(u))
        for action, group in (("unassigned", removed), ("assigned", added))
        for u in group
    ]
