"""The REST endpoints the sandbox serves, under GitHub's paths and parameter names (the
parameter names match GitHub's OpenAPI description, so contract checks can find each
operation by its route)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.auth import (
    Caller,
    check_scope,
    issue_installation_token,
    resolve_token,
    token_scope,
    verify_app_jwt,
)
from github_sandbox.operations import Outcome, SandboxError, not_found
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Repo, iso

routes = web.RouteTableDef()
REPO = "/repos/{owner}/{repo}"
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


def _sandbox(request: web.Request) -> Sandbox:
    return request.app[SANDBOX]


def _app_caller(request: web.Request) -> Caller:
    return verify_app_jwt(_sandbox(request).world, request.headers.get("Authorization", ""))


def _repo(request: web.Request) -> tuple[Repo, Caller]:
    """The repository named in the path, as the caller may see it (404 otherwise, as
    GitHub hides what a token cannot reach)."""
    sandbox = _sandbox(request)
    caller = resolve_token(sandbox.world, request.headers.get("Authorization", ""))
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None:
        raise not_found()
    if caller.kind == "installation":
        assert caller.installation is not None
        if repo.full_name.lower() not in caller.installation.repos:
            raise not_found()
        check_scope(caller, repo.full_name, request.method, request.path)
    elif repo.private and sandbox.ops.permission(repo, caller.user) == "none":
        raise not_found()
    return repo, caller


async def _json(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise SandboxError(400, "Problems parsing JSON") from exc


def _number(request: web.Request, key: str) -> int:
    try:
        return int(request.match_info[key])
    except ValueError as exc:
        raise not_found() from exc


def _answer(request: web.Request, outcome: Outcome) -> web.Response:
    _sandbox(request).emit(outcome.hooks)
    return web.json_response(outcome.body, status=outcome.status)


def _page(request: web.Request, items: list[Any]) -> web.Response:
    """One page of `items` with GitHub's `Link` header (next, last, prev, first)."""
    try:
        per_page = min(max(int(request.query.get("per_page", DEFAULT_PER_PAGE)), 1), MAX_PER_PAGE)
        page = max(int(request.query.get("page", 1)), 1)
    except ValueError as exc:
        raise SandboxError(400, "Invalid page or per_page") from exc
    last = max((len(items) + per_page - 1) // per_page, 1)
    chunk = items[(page - 1) * per_page : page * per_page]
    base = _sandbox(request).base_url.rstrip("/") + request.path

    def url(number: int) -> str:
        query = {**request.query, "per_page": str(per_page), "page": str(number)}
        return f"{base}?{urlencode(query)}"

    links = []
    if page < last:
        links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if page > 1:
        links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
    headers = {"Link": ", ".join(links)} if links else {}
    return web.json_response(chunk, headers=headers)


# -- the App ------------------------------------------------------------------------------


@routes.get("/app")
async def get_app(request: web.Request) -> web.Response:
    _app_caller(request)
    sandbox = _sandbox(request)
    return web.json_response(sandbox.shapes.app(sandbox.world.app))


@routes.get(REPO + "/installation")
async def get_repo_installation(request: web.Request) -> web.Response:
    _app_caller(request)
    sandbox = _sandbox(request)
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None or repo.installation_id is None:
        raise not_found()
    inst = sandbox.world.installations[repo.installation_id]
    return web.json_response(sandbox.shapes.installation(sandbox.world.app, inst))


@routes.post("/app/installations/{installation_id}/access_tokens")
async def create_access_token(request: web.Request) -> web.Response:
    _app_caller(request)
    sandbox = _sandbox(request)
    inst = sandbox.world.installations.get(_number(request, "installation_id"))
    if inst is None:
        raise not_found()
    if inst.suspended_at is not None:
        raise SandboxError(403, "This installation has been suspended")
    repos, permissions = token_scope(sandbox.world, inst, await _json(request))
    token, issued = issue_installation_token(
        sandbox.world, inst, sandbox.token_ttl, repos=repos, permissions=permissions
    )
    sandbox.token_requests[inst.id] = sandbox.token_requests.get(inst.id, 0) + 1
    body: dict[str, Any] = {
        "token": token,
        "expires_at": iso(issued.expires_at),
        "permissions": dict(permissions or sandbox.world.app.permissions),
        "repository_selection": "selected",
    }
    if repos is not None:
        shown = [sandbox.world.repo(name) for name in sorted(repos)]
        body["repositories"] = [sandbox.shapes.repository(r) for r in shown if r is not None]
    return web.json_response(body, status=201)


# -- repositories, issues, labels -------------------------------------------------------


@routes.get(REPO)
async def get_repo(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    return web.json_response(_sandbox(request).shapes.repository(repo))


@routes.post(REPO + "/issues")
async def create_issue(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    return _answer(request, _sandbox(request).ops.create_issue(repo, caller.user, data))


@routes.get(REPO + "/issues")
async def list_issues(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    return _page(request, _sandbox(request).ops.list_issues(repo, dict(request.query)))


@routes.get(REPO + "/issues/{issue_number}")
async def get_issue(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    return _answer(request, _sandbox(request).ops.get_issue(repo, _number(request, "issue_number")))


@routes.patch(REPO + "/issues/{issue_number}")
async def update_issue(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    number = _number(request, "issue_number")
    return _answer(request, _sandbox(request).ops.update_issue(repo, caller.user, number, data))


@routes.get(REPO + "/labels")
async def list_repo_labels(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    shapes = _sandbox(request).shapes
    return _page(request, [shapes.label(repo, label) for label in repo.labels.values()])


@routes.get(REPO + "/issues/{issue_number}/labels")
async def list_issue_labels(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    ops = _sandbox(request).ops
    return _page(request, ops.issue_labels(repo, ops.issue(repo, _number(request, "issue_number"))))


@routes.post(REPO + "/issues/{issue_number}/labels")
async def add_labels(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    number = _number(request, "issue_number")
    return _answer(request, _sandbox(request).ops.add_labels(repo, caller.user, number, data))


@routes.delete(REPO + "/issues/{issue_number}/labels/{name}")
async def remove_label(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    number = _number(request, "issue_number")
    name = request.match_info["name"]
    return _answer(request, _sandbox(request).ops.remove_label(repo, caller.user, number, name))


# -- comments ---------------------------------------------------------------------------


@routes.get(REPO + "/issues/{issue_number}/comments")
async def list_comments(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    number = _number(request, "issue_number")
    return _page(request, _sandbox(request).ops.list_comments(repo, number))


@routes.post(REPO + "/issues/{issue_number}/comments")
async def create_comment(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    number = _number(request, "issue_number")
    return _answer(request, _sandbox(request).ops.create_comment(repo, caller.user, number, data))


@routes.get(REPO + "/issues/comments/{comment_id}")
async def get_comment(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    sandbox = _sandbox(request)
    comment = sandbox.ops.comment(repo, _number(request, "comment_id"))
    return web.json_response(sandbox.shapes.comment(repo, comment))


@routes.patch(REPO + "/issues/comments/{comment_id}")
async def update_comment(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    comment_id = _number(request, "comment_id")
    ops = _sandbox(request).ops
    return _answer(request, ops.update_comment(repo, caller.user, comment_id, data))


# -- pull requests, collaborators ------------------------------------------------------


@routes.post(REPO + "/pulls")
async def create_pull(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    return _answer(request, _sandbox(request).ops.create_pull(repo, caller.user, data))


@routes.get(REPO + "/pulls")
async def list_pulls(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    return _page(request, _sandbox(request).ops.list_pulls(repo, dict(request.query)))


@routes.get(REPO + "/pulls/{pull_number}")
async def get_pull(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    sandbox = _sandbox(request)
    pull = sandbox.ops.pull(repo, _number(request, "pull_number"))
    return web.json_response(sandbox.shapes.pull(repo, pull))


@routes.patch(REPO + "/pulls/{pull_number}")
async def update_pull(request: web.Request) -> web.Response:
    repo, caller = _repo(request)
    data = await _json(request)
    number = _number(request, "pull_number")
    ops = _sandbox(request).ops
    if data.get("state") == "closed":
        return _answer(request, ops.close_pull(repo, caller.user, number, merge=False))
    return web.json_response(_sandbox(request).shapes.pull(repo, ops.pull(repo, number)))


@routes.get(REPO + "/collaborators/{username}/permission")
async def collaborator_permission(request: web.Request) -> web.Response:
    repo, _ = _repo(request)
    username = request.match_info["username"]
    return _answer(request, _sandbox(request).ops.collaborator_permission(repo, username))
