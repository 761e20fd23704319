"""Which issues `GET /repos/{owner}/{repo}/issues` keeps, by its query, as GitHub's
description documents each parameter: `state`, `labels`, `creator`, `since`, and
`milestone` (a number, `*` for any, `none`), `assignee` (a login, `*`, `none`), `type` (an
issue type's name, `*`, `none`) and `mentioned` (a login @-mentioned in the issue's body or
its comments)."""

from __future__ import annotations

import re
from collections.abc import Callable

from github_sandbox.state import Issue, Repo

ANY, NONE = "*", "none"


def kept(repo: Repo, query: dict[str, str], since: float) -> Callable[[Issue], bool]:
    """The test an issue must pass to be listed for `query` (`since`: its `since` as a
    timestamp, `operations.updated_since`)."""
    state = query.get("state", "open")
    wanted = {n.strip().lower() for n in query.get("labels", "").split(",") if n.strip()}
    creator = query.get("creator", "").lower()
    checks: list[Callable[[Issue], bool]] = [
        lambda i: state == "all" or i.state == state,
        lambda i: wanted <= {name.lower() for name in i.labels},
        lambda i: not creator or i.user.login.lower() == creator,
        lambda i: i.updated_at >= since,
    ]
    if "milestone" in query:
        checks.append(_by_milestone(query["milestone"]))
    if "assignee" in query:
        checks.append(_by_assignee(query["assignee"]))
    if "type" in query:
        checks.append(_by_type(query["type"]))
    if "mentioned" in query:
        checks.append(_mentions(repo, query["mentioned"]))
    return lambda issue: all(check(issue) for check in checks)


def _by_milestone(value: str) -> Callable[[Issue], bool]:
    if value == ANY:
        return lambda i: i.milestone is not None
    if value.lower() == NONE:
        return lambda i: i.milestone is None
    # "it should refer to a milestone by its `number` field": anything else names none.
    number = int(value) if value.isdigit() else None
    return lambda i: i.milestone is not None and i.milestone.number == number


def _by_assignee(value: str) -> Callable[[Issue], bool]:
    if value == ANY:
        return lambda i: bool(i.assignees)
    if value.lower() == NONE:
        return lambda i: not i.assignees
    login = value.lower()
    return lambda i: any(user.login.lower() == login for user in i.assignees)


def _by_type(value: str) -> Callable[[Issue], bool]:
    if value == ANY:
        return lambda i: i.issue_type is not None
    if value.lower() == NONE:
        return lambda i: i.issue_type is None
    name = value.lower()
    return lambda i: i.issue_type is not None and i.issue_type.lower() == name


def _mentions(repo: Repo, login: str) -> Callable[[Issue], bool]:
    # A mention is `@login` not inside a longer name or an e-mail address.
    pattern = re.compile(rf"(?<![\w@.-])@{re.escape(login)}(?![\w-])", re.IGNORECASE)

    def mentioned(issue: Issue) -> bool:
        texts = [issue.body or ""]
        texts += [repo.comments[c].body for c in issue.comment_ids if c in repo.comments]
        return any(pattern.search(text) for text in texts)

    return mentioned
