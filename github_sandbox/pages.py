"""Readable HTML pages at the `html_url`s the sandbox hands out (issues, pull requests with
their diff, repositories, users), so a link printed in Chat opens in a browser.

Every text is the sandbox's stored data rendered through Jinja2 with autoescaping: an issue
body is shown, never interpreted. Private repositories answer 404 (pages carry no
credentials). These routes are the web host, not the REST API: the recorder and the contract
check leave them out (`is_page`).
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined

from github_sandbox.appkeys import SANDBOX
from github_sandbox.git import commit_info, resolve_commit
from github_sandbox.operations import not_found
from github_sandbox.pull_view import after_pr_view
from github_sandbox.state import Issue, Repo, iso

routes = web.RouteTableDef()
PAGE = "page"
# A diff larger than this is cut (the page says so): a page must stay quick to render.
MAX_DIFF_BYTES = 512 * 1024
_COLOR = re.compile(r"[0-9a-fA-F]{6}")


@cache
def _templates() -> Environment:
    return Environment(
        loader=PackageLoader("github_sandbox", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def is_page(request: web.Request) -> bool:
    route = request.match_info.route
    return bool(route.name and route.name.startswith(f"{PAGE}:"))


def render(name: str, **context: Any) -> web.Response:
    html = _templates().get_template(name).render(**context)
    return web.Response(text=html, content_type="text/html", charset="utf-8")


def _repo(request: web.Request) -> Repo:
    sandbox = request.app[SANDBOX]
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None or repo.private:
        raise not_found()
    return repo


def _issue(request: web.Request, *, pull: bool) -> tuple[Repo, Issue]:
    repo = _repo(request)
    issue = repo.issues.get(int(request.match_info["number"]))
    if issue is None or issue.is_pull != pull:
        raise not_found()
    return repo, issue


def _view(repo: Repo, issue: Issue) -> dict[str, Any]:
    return {
        "repo": repo.full_name,
        "number": issue.number,
        "title": issue.title,
        "body": issue.body or "",
        "author": issue.user.login,
        "state": issue.state,
        "created": iso(issue.created_at),
        "labels": [
            {
                "name": label.name,
                "color": label.color if _COLOR.fullmatch(label.color) else "ededed",
            }
            for label in (repo.labels[name.lower()] for name in issue.labels)
        ],
        "comments": [
            {
                "id": c.id,
                "author": c.user.login,
                "created": iso(c.created_at),
                "body": c.body,
            }
            for c in (repo.comments[i] for i in issue.comment_ids if i in repo.comments)
        ],
    }


def pull_diff(repo: Repo, number: int) -> tuple[str, bool]:
    """The pull request's diff (base...head, as GitHub shows it) and whether it was cut."""
    pull = repo.pulls[number]
    if repo.git_path is None:
        return "", False
    result = subprocess.run(
        ["git", "--git-dir", str(repo.git_path), "diff", f"{pull.base_sha}...{pull.head_sha}"],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/"},
        check=False,
    )
    raw = result.stdout if result.returncode == 0 else b""
    return raw[:MAX_DIFF_BYTES].decode(errors="replace"), len(raw) > MAX_DIFF_BYTES


@routes.get("/{owner}/{repo}", name=f"{PAGE}:repo")
async def repo_page(request: web.Request) -> web.Response:
    repo = _repo(request)
    issues = sorted(repo.issues.values(), key=lambda i: -i.number)
    return render(
        "repo.html.j2",
        repo=repo.full_name,
        issues=[
            {"number": i.number, "title": i.title, "state": i.state, "pull": i.is_pull}
            for i in issues
        ],
    )


@routes.get("/{owner}/{repo}/issues/{number:\\d+}", name=f"{PAGE}:issue")
async def issue_page(request: web.Request) -> web.Response:
    repo, issue = _issue(request, pull=False)
    return render("issue.html.j2", **_view(repo, issue))


@routes.get("/{owner}/{repo}/pull/{number:\\d+}", name=f"{PAGE}:pull")
async def pull_page(request: web.Request) -> web.Response:
    repo, issue = _issue(request, pull=True)
    pull = repo.pulls[issue.number]
    diff, cut = pull_diff(repo, issue.number)
    state = "merged" if pull.merged_at is not None else issue.state
    return render(
        "pull.html.j2",
        **_view(repo, issue),
        **after_pr_view(request.app[SANDBOX], repo, pull),
        pull_state=state,
        head=pull.head_ref,
        base=pull.base_ref,
        diff_lines=diff.splitlines(),
        diff_cut=cut,
    )


@routes.get("/{owner}/{repo}/pull/{number:\\d+}.diff", name=f"{PAGE}:diff")
async def pull_diff_text(request: web.Request) -> web.Response:
    repo, issue = _issue(request, pull=True)
    diff, _ = pull_diff(repo, issue.number)
    return web.Response(text=diff, content_type="text/plain", charset="utf-8")


def commit_diff(repo: Repo, sha: str) -> tuple[str, bool]:
    """The commit's changes against its first parent (as GitHub's commit page shows them)."""
    if repo.git_path is None:
        return "", False
    result = subprocess.run(
        ["git", "--git-dir", str(repo.git_path), "show", "--format=", "--patch", sha, "--"],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/"},
        check=False,
    )
    raw = result.stdout if result.returncode == 0 else b""
    return raw[:MAX_DIFF_BYTES].decode(errors="replace"), len(raw) > MAX_DIFF_BYTES


# GitHub's commit page, which the Board's ledger and CI history link (`…/commit/SHA`).
@routes.get("/{owner}/{repo}/commit/{sha:[0-9a-f]{7,40}}", name=f"{PAGE}:commit")
async def commit_page(request: web.Request) -> web.Response:
    repo = _repo(request)
    found = None
    if repo.git_path is not None:
        sha = resolve_commit(repo.git_path, request.match_info["sha"])
        found = commit_info(repo.git_path, sha) if sha else None
    if found is None:
        raise not_found()
    diff, cut = commit_diff(repo, found.sha)
    return render(
        "commit.html.j2",
        repo=repo.full_name,
        sha=found.sha,
        message=found.message,
        author=found.author_name,
        parents=list(found.parents),
        diff_lines=diff.splitlines(),
        diff_cut=cut,
    )
