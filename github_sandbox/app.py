"""The sandbox's aiohttp application: routes, GitHub-shaped errors, rate-limit headers,
injected faults, and (for tests) a record of every exchange."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from github_sandbox import (
    ci_control_routes,
    ci_routes,
    control_routes,
    git_http,
    install_pages,
    pages,
    pull_forms,
    registration_routes,
    rest_routes,
    review_routes,
)
from github_sandbox.appkeys import SANDBOX, USAGE
from github_sandbox.auth import presented, rate_key
from github_sandbox.operations import SandboxError
from github_sandbox.ratelimit import budget
from github_sandbox.sandbox import Exchange, Sandbox

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
INJECTED = web.RequestKey("injected_fault", bool)


def _is_control(request: web.Request) -> bool:
    """The sandbox's own control API, GitHub's web pages and git over HTTP: none is the
    REST API (no rate-limit headers, never recorded for the contract check)."""
    if request.path.startswith(control_routes.PREFIX):
        return True
    resource = request.match_info.route.resource
    return (
        (resource is not None and resource.canonical in WEB_PAGES)
        or pages.is_page(request)
        or git_http.is_git(request)
    )


WEB_PAGES = frozenset(
    route.path for route in registration_routes.web_routes if isinstance(route, web.RouteDef)
)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        SandboxError(status, message).body(), status=status, headers=headers or {}
    )


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except SandboxError as exc:
        return web.json_response(exc.body(), status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason)


@web.middleware
async def faults(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Injected failures, on the REST API and on git over HTTP (an outage, or a 502 in front
    of a push, reaches git too); never on the control API or the web pages."""
    git = git_http.is_git(request)
    if _is_control(request) and not git:
        return await handler(request)
    fault = request.app[SANDBOX].faults.take(request.method, request.path)
    if fault is None:
        return await handler(request)
    request[INJECTED] = True
    if fault.after_effect:
        await handler(request)
    log.info("sandbox: injected %s on %s %s", fault.status, request.method, request.path)
    if git:  # git's answers are plain text
        return git_http.plain(fault.status, fault.message, **fault.headers)
    return _error(fault.status, fault.message, fault.headers)


@web.middleware
async def rate_limit_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """GitHub's `x-ratelimit-*` headers on every REST answer, counted per credential (all
    of an installation's tokens together, as GitHub counts them)."""
    response = await handler(request)
    if _is_control(request):
        return response
    sandbox = request.app[SANDBOX]
    counts = request.app[USAGE]
    key = rate_key(sandbox.world, request.headers.get("Authorization", ""))
    if request.path != "/rate_limit":  # asking for the budget does not spend it
        counts[key] = counts.get(key, 0) + 1
    for name, value in budget(sandbox.clock(), counts.get(key, 0)).items():
        response.headers.setdefault(f"x-ratelimit-{name}", str(value))
    response.headers.setdefault("x-ratelimit-resource", "core")
    response.headers["x-github-request-id"] = uuid.uuid4().hex[:20].upper()
    return response


@web.middleware
async def recorder(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    sandbox = request.app[SANDBOX]
    if sandbox.record and not _is_control(request) and isinstance(response, web.Response):
        resource = request.match_info.route.resource
        sandbox.traffic.append(
            Exchange(
                method=request.method,
                route=resource.canonical if resource is not None else request.path,
                path=request.path,
                query=dict(request.query),
                status=response.status,
                request=_decoded(await request.read()),
                response=_decoded(response.body if isinstance(response.body, bytes) else b""),
                injected=request.get(INJECTED, False),
                credential=presented(sandbox.world, request.headers.get("Authorization", "")),
                headers=dict(response.headers),
            )
        )
    return response


def _decoded(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


@web.middleware
async def persist(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    if request.method != "GET" and not git_http.is_git(request):  # git keeps its own files
        request.app[SANDBOX].save()
    return response


def create_sandbox_app(sandbox: Sandbox) -> web.Application:
    middlewares = [control_routes.guard, recorder, rate_limit_headers, errors, faults]
    if sandbox.state_path is not None:
        middlewares.insert(0, persist)
    app = web.Application(middlewares=middlewares)
    app[SANDBOX] = sandbox
    app[USAGE] = {}
    app.add_routes(rest_routes.routes)
    app.add_routes(review_routes.routes)
    app.add_routes(ci_routes.routes)
    app.add_routes(registration_routes.web_routes)
    app.add_routes(control_routes.routes)
    app.add_routes(ci_control_routes.routes)
    app.add_routes(git_http.routes)
    app.add_routes(install_pages.routes)  # `/apps/{slug}` before the pages' `/{owner}/{repo}`
    # Last: the pages' `/{owner}/{repo}/...` patterns must not shadow a REST route.
    app.add_routes(pages.routes)
    app.add_routes(ci_routes.log_routes)
    app.add_routes(pull_forms.routes)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        yield
        await sandbox.hooks.close()
        await sandbox.other_hooks.close()
        sandbox.save()

    app.cleanup_ctx.append(lifecycle)
    return app
