"""GitHub's JSON shapes for the sandbox's objects, as the REST API and webhooks send them.

The field sets follow octokit/webhooks' schemas (which allow no extra keys) and GitHub's
OpenAPI description (which requires these); tests validate both against the real files.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

from github_sandbox import mergeability
from github_sandbox.state import (
    PERMISSION_RANK,
    AppInfo,
    Comment,
    Installation,
    Issue,
    Label,
    Milestone,
    Pull,
    Reaction,
    Repo,
    User,
    iso,
)


def node_id(kind: str, ident: int) -> str:
    return base64.b64encode(f"{kind}:{ident}".encode()).decode()


class Shapes:
    """Builds payloads with URLs under the sandbox's own base URL."""

    def __init__(self, base_url: str) -> None:
        self.api = base_url.rstrip("/")
        self.html = self.api  # no separate web host: html_url points at the sandbox too

    # -- people and apps -----------------------------------------------------------------

    def user(self, user: User) -> dict[str, Any]:
        url = f"{self.api}/users/{user.login}"
        return {
            "login": user.login,
            "id": user.id,
            "node_id": node_id("User", user.id),
            "avatar_url": f"{self.html}/avatars/u/{user.id}",
            "gravatar_id": "",
            "url": url,
            "html_url": f"{self.html}/{user.login}",
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions",
            "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
            "type": user.type,
            "site_admin": False,
        }

    def app(self, app: AppInfo) -> dict[str, Any]:
        return {
            "id": app.id,
            "slug": app.slug,
            "node_id": node_id("App", app.id),
            "owner": self.user(app.owner),
            "name": app.name,
            "description": "Steelframe sandbox App",
            "external_url": self.html,
            "html_url": f"{self.html}/apps/{app.slug}",
            "created_at": iso(app.created_at),
            "updated_at": iso(app.created_at),
            "permissions": dict(app.permissions),
            "events": list(app.events),
        }

    def installation(self, app: AppInfo, inst: Installation) -> dict[str, Any]:
        return {
            "id": inst.id,
            "account": self.user(inst.account),
            "repository_selection": "selected",
            "access_tokens_url": f"{self.api}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{self.api}/installation/repositories",
            "html_url": f"{self.html}/settings/installations/{inst.id}",
            "app_id": app.id,
            "app_slug": app.slug,
            "target_id": inst.account.id,
            "target_type": "Organization" if inst.account.type == "Organization" else "User",
            "permissions": dict(app.permissions),
            "events": list(app.events),
            "created_at": iso(inst.created_at),
            "updated_at": iso(inst.created_at),
            "single_file_name": None,
            "suspended_at": None if inst.suspended_at is None else iso(inst.suspended_at),
            "suspended_by": None,
        }

    def installation_lite(self, inst: Installation) -> dict[str, Any]:
        return {"id": inst.id, "node_id": node_id("Installation", inst.id)}

    # -- repositories ------------------------------------------------------------------

    def repo_lite(self, repo: Repo) -> dict[str, Any]:
        return {
            "id": repo.id,
            "node_id": node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
        }

    def repository(self, repo: Repo) -> dict[str, Any]:
        url = f"{self.api}/repos/{repo.full_name}"
        html = f"{self.html}/{repo.full_name}"
        open_issues = sum(1 for i in repo.issues.values() if i.state == "open")
        clone = f"{html}.git"  # git over smart HTTP with the token, as on github.com
        return {
            **self.repo_lite(repo),
            "owner": self.user(repo.owner),
            "html_url": html,
            "description": None,
            "fork": False,
            "url": url,
            "forks_url": f"{url}/forks",
            "keys_url": f"{url}/keys{{/key_id}}",
            "collaborators_url": f"{url}/collaborators{{/collaborator}}",
            "teams_url": f"{url}/teams",
            "hooks_url": f"{url}/hooks",
            "issue_events_url": f"{url}/issues/events{{/number}}",
            "events_url": f"{url}/events",
            "assignees_url": f"{url}/assignees{{/user}}",
            "branches_url": f"{url}/branches{{/branch}}",
            "tags_url": f"{url}/tags",
            "blobs_url": f"{url}/git/blobs{{/sha}}",
            "git_tags_url": f"{url}/git/tags{{/sha}}",
            "git_refs_url": f"{url}/git/refs{{/sha}}",
            "trees_url": f"{url}/git/trees{{/sha}}",
            "statuses_url": f"{url}/statuses/{{sha}}",
            "languages_url": f"{url}/languages",
            "stargazers_url": f"{url}/stargazers",
            "contributors_url": f"{url}/contributors",
            "subscribers_url": f"{url}/subscribers",
            "subscription_url": f"{url}/subscription",
            "commits_url": f"{url}/commits{{/sha}}",
            "git_commits_url": f"{url}/git/commits{{/sha}}",
            "comments_url": f"{url}/comments{{/number}}",
            "issue_comment_url": f"{url}/issues/comments{{/number}}",
            "contents_url": f"{url}/contents/{{+path}}",
            "compare_url": f"{url}/compare/{{base}}...{{head}}",
            "merges_url": f"{url}/merges",
            "archive_url": f"{url}/{{archive_format}}{{/ref}}",
            "downloads_url": f"{url}/downloads",
            "issues_url": f"{url}/issues{{/number}}",
            "pulls_url": f"{url}/pulls{{/number}}",
            "milestones_url": f"{url}/milestones{{/number}}",
            "notifications_url": f"{url}/notifications{{?since,all,participating}}",
            "labels_url": f"{url}/labels{{/name}}",
            "releases_url": f"{url}/releases{{/id}}",
            "deployments_url": f"{url}/deployments",
            "created_at": iso(repo.created_at),
            "updated_at": iso(repo.created_at),
            "pushed_at": iso(repo.created_at),
            "git_url": clone,
            "ssh_url": clone,
            "clone_url": clone,
            "svn_url": html,
            "homepage": None,
            "size": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": None,
            "has_issues": True,
            "has_projects": False,
            "has_downloads": True,
            "has_wiki": False,
            "has_pages": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "private" if repo.private else "public",
            "custom_properties": {},
        }

    def full_repository(self, repo: Repo) -> dict[str, Any]:
        """`GET /repos/{owner}/{repo}`'s shape: the repository plus the counts only that
        answer carries (webhooks' repository objects have no such keys)."""
        return {
            **self.repository(repo),
            "has_discussions": False,
            "network_count": 0,
            "subscribers_count": 0,
        }

    def collaborator(self, user: User, permission: str) -> dict[str, Any]:
        """A user as the collaborator-permission answer names them: with their role and
        what it lets them do."""
        level = PERMISSION_RANK.get(permission, 0)
        return {
            **self.user(user),
            "permissions": {
                "pull": level >= 1,
                "triage": permission != "read" and level >= 1,
                "push": level >= 2,
                "maintain": permission in ("maintain", "admin"),
                "admin": level >= 3,
            },
            "role_name": permission,
        }

    # -- issues, labels, comments ------------------------------------------------------

    def label(self, repo: Repo, label: Label) -> dict[str, Any]:
        return {
            "id": label.id,
            "node_id": node_id("Label", label.id),
            "url": f"{self.api}/repos/{repo.full_name}/labels/{label.name}",
            "name": label.name,
            "color": label.color,
            "default": label.default,
            "description": label.description,
        }

    def reactions(self, url: str, given: list[Reaction] | None = None) -> dict[str, Any]:
        counts = dict.fromkeys(
            ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket"), 0
        )
        for reaction in given or []:
            counts[reaction.content] += 1
        return {"url": f"{url}/reactions", "total_count": len(given or []), **counts}

    def milestone(self, repo: Repo, item: Milestone) -> dict[str, Any]:
        """A milestone as an issue names it (`nullable-milestone`); its counts are of the
        repository's issues that carry it."""
        url = f"{self.api}/repos/{repo.full_name}/milestones/{item.number}"
        carrying = [i for i in repo.issues.values() if i.milestone is item]
        return {
            "url": url,
            "html_url": f"{self.html}/{repo.full_name}/milestone/{item.number}",
            "labels_url": f"{url}/labels",
            "id": item.id,
            "node_id": node_id("Milestone", item.id),
            "number": item.number,
            "state": "open",
            "title": item.title,
            "description": None,
            "creator": self.user(item.creator),
            "open_issues": sum(1 for i in carrying if i.state == "open"),
            "closed_issues": sum(1 for i in carrying if i.state == "closed"),
            "created_at": iso(item.created_at),
            "updated_at": iso(item.created_at),
            "closed_at": None,
            "due_on": None,
        }

    def issue(self, repo: Repo, issue: Issue) -> dict[str, Any]:
        url = f"{self.api}/repos/{repo.full_name}/issues/{issue.number}"
        kind = "pull" if issue.is_pull else "issues"
        shape: dict[str, Any] = {
            "url": url,
            "repository_url": f"{self.api}/repos/{repo.full_name}",
            "labels_url": f"{url}/labels{{/name}}",
            "comments_url": f"{url}/comments",
            "events_url": f"{url}/events",
            "html_url": f"{self.html}/{repo.full_name}/{kind}/{issue.number}",
            "id": issue.id,
            "node_id": node_id("Issue", issue.id),
            "number": issue.number,
            "title": issue.title,
            "user": self.user(issue.user),
            "labels": [self.label(repo, repo.labels[name.lower()]) for name in issue.labels],
            "state": issue.state,
            "locked": False,
            "assignee": self.user(issue.assignees[0]) if issue.assignees else None,
            "assignees": [self.user(user) for user in issue.assignees],
            "milestone": None if issue.milestone is None else self.milestone(repo, issue.milestone),
            "comments": len(issue.comment_ids),
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": None if issue.closed_at is None else iso(issue.closed_at),
            "author_association": author_association(repo, issue.user),
            "active_lock_reason": None,
            "body": issue.body,
            "reactions": self.reactions(url),
            "timeline_url": f"{url}/timeline",
            "performed_via_github_app": None,
            "state_reason": issue.state_reason,
            "draft": False,
        }
        if issue.issue_type is not None:
            shape["type"] = issue_type(issue.issue_type)
        if issue.is_pull:
            pull = repo.pulls[issue.number]
            pull_url = f"{self.api}/repos/{repo.full_name}/pulls/{issue.number}"
            html = shape["html_url"]
            shape["pull_request"] = {
                "url": pull_url,
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": None if pull.merged_at is None else iso(pull.merged_at),
            }
            shape["draft"] = pull.draft
        return shape

    def comment(self, repo: Repo, comment: Comment) -> dict[str, Any]:
        url = f"{self.api}/repos/{repo.full_name}/issues/comments/{comment.id}"
        issue = repo.issues[comment.issue_number]
        kind = "pull" if issue.is_pull else "issues"
        return {
            "url": url,
            "html_url": f"{self.html}/{repo.full_name}/{kind}/{comment.issue_number}"
            f"#issuecomment-{comment.id}",
            "issue_url": f"{self.api}/repos/{repo.full_name}/issues/{comment.issue_number}",
            "id": comment.id,
            "node_id": node_id("IssueComment", comment.id),
            "user": self.user(comment.user),
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
            "author_association": author_association(repo, comment.user),
            "performed_via_github_app": None,
            "body": comment.body,
            "reactions": self.reactions(url, comment.reactions),
        }

    def timeline_comment(self, repo: Repo, comment: Comment) -> dict[str, Any]:
        """A comment as the issue timeline lists it: a `commented` event."""
        return {
            "event": "commented",
            "actor": self.user(comment.user),
            **self.comment(repo, comment),
        }

    # -- pull requests -------------------------------------------------------------------

    def pull(self, repo: Repo, pull: Pull) -> dict[str, Any]:
        issue = repo.issues[pull.number]
        url = f"{self.api}/repos/{repo.full_name}/pulls/{pull.number}"
        issue_url = f"{self.api}/repos/{repo.full_name}/issues/{pull.number}"
        html = f"{self.html}/{repo.full_name}/pull/{pull.number}"
        statuses = f"{self.api}/repos/{repo.full_name}/statuses/{pull.head_sha}"
        owner = repo.owner.login

        def ref(name: str, sha: str) -> dict[str, Any]:
            return {
                "label": f"{owner}:{name}",
                "ref": name,
                "sha": sha,
                "user": self.user(repo.owner),
                "repo": self.repository(repo),
            }

        def link(href: str) -> dict[str, str]:
            return {"href": href}

        merge = mergeability.reported(repo, pull, is_open=issue.state == "open")

        return {
            "url": url,
            "id": pull.id,
            "node_id": node_id("PullRequest", pull.id),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue_url,
            "number": pull.number,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "user": self.user(issue.user),
            "body": issue.body,
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": None if issue.closed_at is None else iso(issue.closed_at),
            "merged_at": None if pull.merged_at is None else iso(pull.merged_at),
            "merge_commit_sha": pull.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [self.user(user) for user in pull.requested_reviewers],
            "requested_teams": [],
            "labels": [self.label(repo, repo.labels[name.lower()]) for name in issue.labels],
            "milestone": None,
            "commits_url": f"{url}/commits",
            "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{self.api}/repos/{repo.full_name}/pulls/comments{{/number}}",
            "comments_url": f"{issue_url}/comments",
            "statuses_url": statuses,
            "head": ref(pull.head_ref, pull.head_sha),
            "base": ref(pull.base_ref, pull.base_sha),
            "_links": {
                "self": link(url),
                "html": link(html),
                "issue": link(issue_url),
                "comments": link(f"{issue_url}/comments"),
                "review_comments": link(f"{url}/comments"),
                "review_comment": link(
                    f"{self.api}/repos/{repo.full_name}/pulls/comments{{/number}}"
                ),
                "commits": link(f"{url}/commits"),
                "statuses": link(statuses),
            },
            "author_association": author_association(repo, issue.user),
            "auto_merge": None,
            "active_lock_reason": None,
            "draft": pull.draft,
            "merged": pull.merged_at is not None,
            "mergeable": merge.mergeable,
            "rebaseable": merge.rebaseable,
            "mergeable_state": merge.state,
            "merged_by": None if pull.merged_by is None else self.user(pull.merged_by),
            "comments": len(issue.comment_ids),
            "review_comments": sum(
                1 for c in repo.review_comments.values() if c.pull_number == pull.number
            ),
            "maintainer_can_modify": False,
            "commits": 1,
            "additions": 0,
            "deletions": 0,
            "changed_files": 0,
        }


def author_association(repo: Repo, user: User) -> str:
    if user.login.lower() == repo.owner.login.lower():
        return "OWNER"
    if user.login.lower() in repo.collaborators:
        return "COLLABORATOR"
    return "NONE"


def issue_type(name: str) -> dict[str, Any]:
    """An issue type by its name (`issue-type`); its id derived from the name, as the
    sandbox keeps no table of types."""
    number = zlib.crc32(name.lower().encode())
    return {"id": number, "node_id": node_id("IssueType", number), "name": name, "description": ""}
