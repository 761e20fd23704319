"""What every REST handler of the sandbox needs: the sandbox, the repository as the
caller may see it, the JSON body, path numbers, answers with their webhooks, and pages
with GitHub's `Link` header."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.auth import Caller, check_scope, resolve_token, verify_app_jwt
from github_sandbox.operations import Outcome, SandboxError, not_found, validation_failed
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Repo

REPO = "/repos/{owner}/{repo}"
DEFAULT_PER_PAGE = 30
MAX_PER_PAGE = 100


def sandbox_of(request: web.Request) -> Sandbox:
    return request.app[SANDBOX]


def app_caller(request: web.Request) -> Caller:
    return verify_app_jwt(sandbox_of(request).world, request.headers.get("Authorization", ""))


def repo_and_caller(request: web.Request) -> tuple[Repo, Caller]:
    """The repository named in the path, as the caller may see it (404 otherwise, as
    GitHub hides what a token cannot reach)."""
    sandbox = sandbox_of(request)
    caller = resolve_token(sandbox.world, request.headers.get("Authorization", ""))
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None:
        raise not_found()
    if caller.kind == "installation":
        assert caller.installation is not None
        if repo.full_name.lower() not in caller.installation.repos:
            raise not_found()
        resource = request.match_info.route.resource
        route = None if resource is None else resource.canonical
        check_scope(caller, repo.full_name, request.method, request.path, route)
    elif repo.private and sandbox.ops.permission(repo, caller.user) == "none":
        raise not_found()
    return repo, caller


async def read_json(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise SandboxError(400, "Problems parsing JSON") from exc


def path_number(request: web.Request, key: str) -> int:
    try:
        return int(request.match_info[key])
    except ValueError as exc:
        raise not_found() from exc


def answer(request: web.Request, outcome: Outcome) -> web.Response:
    sandbox_of(request).emit(outcome.hooks)
    headers = {}
    body = outcome.body
    if outcome.status == 201 and isinstance(body, dict) and isinstance(body.get("url"), str):
        # GitHub names what it created in `Location` (documented on every create the
        # description has: issues, comments, labels, pull requests, review comments).
        headers["Location"] = body["url"]
    return web.json_response(body, status=outcome.status, headers=headers)


def page(request: web.Request, items: list[Any]) -> web.Response:
    """One page of `items` with GitHub's `Link` header (next, last, prev, first)."""
    chunk, headers = page_slice(request, items)
    return web.json_response(chunk, headers=headers)


def page_slice(request: web.Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """The page of `items` the query asks for, and the `Link` header to the others. A page
    or per_page that is not a number is GitHub's documented 422 "Validation Failed"."""
    try:
        per_page = min(max(int(request.query.get("per_page", DEFAULT_PER_PAGE)), 1), MAX_PER_PAGE)
        page = max(int(request.query.get("page", 1)), 1)
    except ValueError as exc:
        field_name = (
            "page"
            if "page" in request.query and not request.query["page"].isdigit()
            else "per_page"
        )
        raise validation_failed(field_name) from exc
    last = max((len(items) + per_page - 1) // per_page, 1)
    chunk = items[(page - 1) * per_page : page * per_page]
    base = sandbox_of(request).base_url.rstrip("/") + request.path

    def url(number: int) -> str:
        query = {**request.query, "per_page": str(per_page), "page": str(number)}
        return f"{base}?{urlencode(query)}"

    links = []
    if page < last:
        links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if page > 1:
        links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
    headers = {"Link": ", ".join(links)} if links else {}
    return chunk, headers
