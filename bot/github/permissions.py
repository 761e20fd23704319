"""Which permission a GitHub call needs, and the repository paths calls are made on.

The client asks for a token limited to one repository and to the least permission each call
needs; this table is that least permission, from GitHub's "Permissions required for GitHub
Apps" page (the sandbox derives its own from GitHub's OpenAPI description, so a wrong entry
here fails its contract tests instead of agreeing with itself).
"""

from __future__ import annotations

from urllib.parse import quote

from bot.errors import BadRequest

# The fine-grained permission each part of a repository's API needs (GitHub docs, the
# "Permissions required for GitHub Apps" page): labels belong to issues. The repository
# itself and a collaborator's permission need only `metadata: read`, which every token has.
AREA_PERMISSIONS = {
    "issues": "issues",
    "labels": "issues",
    "pulls": "pull_requests",
    "contents": "contents",
    "git": "contents",
    "check-runs": "checks",
    "actions": "actions",
}
# Under /commits/{ref}/ the last part says which: check runs or the combined status.
COMMIT_PERMISSIONS = {"check-runs": "checks", "status": "statuses"}
METADATA_ONLY = {"metadata": "read"}
READ_METHODS = frozenset({"GET", "HEAD"})


def split_repo(repo: str) -> tuple[str, str]:
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise BadRequest(f"repository must look like owner/name, got {repo!r}")
    return owner, name


def needed_permissions(method: str, path: str) -> dict[str, str]:
    """The least permission a call needs: `path` is relative to the repository URL
    ("/issues/3/comments"); reads need `read`, anything else `write`."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    area = parts[0]
    name = AREA_PERMISSIONS.get(area)
    if area == "commits" and len(parts) >= 3:
        name = COMMIT_PERMISSIONS.get(parts[-1])
    elif area == "pulls" and len(parts) == 3 and parts[-1] == "merge":
        name = "contents"  # merging writes the base branch: GitHub asks for contents
    if name is None:
        if method.upper() in READ_METHODS and area in ("", "collaborators"):
            return dict(METADATA_ONLY)
        # A call this table does not know would get a token that cannot make it; say so
        # here rather than as GitHub's 403 in production.
        raise ValueError(f"no permission known for {method} {path or '/'}")
    return {name: "read" if method.upper() in READ_METHODS else "write"}


def repo_path(repo: str) -> str:
    owner, name = split_repo(repo)
    return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"
