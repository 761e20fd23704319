"""The sandbox's control API under /_sandbox/: seeding, injected faults, the webhook target,
and looking at what happened (deliveries). Not part of GitHub; tests and `dev` use it.

It mints tokens, grants access, merges and redirects webhooks, so it is not open to whatever
can reach the port (a coding run, a web page the developer opens sending blind no-cors
POSTs): every request needs the secret the sandbox made at start (`Sandbox.control_secret`;
`steelframe dev` writes it to `<data dir>/github-sandbox/control-secret`) in
X-Sandbox-Secret, else 401, and a request a browser sent (it carries `Origin`) is 403.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.faults import fault_from_json
from github_sandbox.operations import SandboxError, not_found
from github_sandbox.review_ops import Reviews
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import Repo

routes = web.RouteTableDef()
PREFIX = "/_sandbox"
SECRET_HEADER = "X-Sandbox-Secret"


@web.middleware
async def guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Refuse the control API to browsers (403) and to callers without the secret (401)."""
    if request.path != PREFIX and not request.path.startswith(PREFIX + "/"):
        return await handler(request)
    if "Origin" in request.headers:
        # Browsers send Origin on every cross-site request and on same-site POSTs; no tool
        # of ours does. (A no-cors POST from any page would otherwise get through.)
        return _refused(403, "the sandbox's control API is not for browsers")
    sent = request.headers.get(SECRET_HEADER, "")
    if not hmac.compare_digest(sent.encode(), request.app[SANDBOX].control_secret.encode()):
        return _refused(401, f"the sandbox's control API needs its start secret in {SECRET_HEADER}")
    return await handler(request)


def _refused(status: int, message: str) -> web.Response:
    return web.json_response(SandboxError(status, message).body(), status=status)


def _sandbox(request: web.Request) -> Sandbox:
    return request.app[SANDBOX]


def _repo(sandbox: Sandbox, request: web.Request) -> Repo:
    """The repository the path names (404 when there is none)."""
    repo = sandbox.world.repo(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None:
        raise not_found()
    return repo


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError as exc:
        raise SandboxError(400, "Problems parsing JSON") from exc
    if not isinstance(data, dict):
        raise SandboxError(400, "expected a JSON object")
    return data


@routes.get(PREFIX + "/state")
async def state(request: web.Request) -> web.Response:
    sandbox = _sandbox(request)
    world = sandbox.world
    return web.json_response(
        {
            "app": {"id": world.app.id, "slug": world.app.slug, "bot": world.app.bot.login},
            "installations": {str(i.id): sorted(i.repos) for i in world.installations.values()},
            "repos": {
                repo.full_name: {
                    "issues": len([i for i in repo.issues.values() if not i.is_pull]),
                    "pulls": len(repo.pulls),
                    "comments": len(repo.comments),
                    "clone_url": repo.git_path.as_uri() if repo.git_path else None,
                }
                for repo in world.repos.values()
            },
            "webhook_url": sandbox.hooks.url,
            "token_requests": {str(k): v for k, v in sandbox.token_requests.items()},
        }
    )


@routes.post(PREFIX + "/faults")
async def add_fault(request: web.Request) -> web.Response:
    sandbox = _sandbox(request)
    try:
        fault = fault_from_json(await _body(request), now=sandbox.clock())
    except (TypeError, ValueError) as exc:
        raise SandboxError(400, str(exc)) from exc
    sandbox.faults.add(fault)
    return web.json_response({"status": fault.status, "times": fault.times}, status=201)


@routes.delete(PREFIX + "/faults")
async def clear_faults(request: web.Request) -> web.Response:
    _sandbox(request).faults.clear()
    return web.json_response({"cleared": True})


@routes.post(PREFIX + "/webhook")
async def set_webhook(request: web.Request) -> web.Response:
    """{"url", "secret"}: where to deliver, signed with what; GitHub pings a new URL."""
    sandbox = _sandbox(request)
    data = await _body(request)
    sandbox.set_webhook(data.get("url"), data.get("secret"))
    return web.json_response({"url": sandbox.hooks.url})


@routes.post(PREFIX + "/installations")
async def install(request: web.Request) -> web.Response:
    """{"account", "repos": ["owner/name", ...]}: install the App; repositories are created
    (with a bare git repo) when new."""
    sandbox = _sandbox(request)
    data = await _body(request)
    account = data.get("account")
    if not isinstance(account, str) or not account:
        raise SandboxError(422, "account is required")
    inst = sandbox.install(account)
    for name in data.get("repos", []):
        sandbox.add_repo(str(name), installation=inst)
    return web.json_response({"id": inst.id, "repos": sorted(inst.repos)}, status=201)


@routes.post(PREFIX + "/repos/{owner}/{repo}/collaborators")
async def grant(request: web.Request) -> web.Response:
    """{"login", "permission"}: admin, maintain, write, triage or read."""
    sandbox = _sandbox(request)
    data = await _body(request)
    full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
    if sandbox.world.repo(full_name) is None:
        raise not_found()
    sandbox.grant(full_name, str(data["login"]), str(data.get("permission", "write")))
    return web.json_response({"login": data["login"]}, status=201)


@routes.post(PREFIX + "/users")
async def user_token(request: web.Request) -> web.Response:
    """{"login"}: a personal token that acts as that user on the REST endpoints."""
    data = await _body(request)
    login = data.get("login")
    if not isinstance(login, str) or not login:
        raise SandboxError(422, "login is required")
    return web.json_response({"token": _sandbox(request).user_token(login)}, status=201)


@routes.post(PREFIX + r"/repos/{owner}/{repo}/pulls/{number:\d+}/merge")
async def merge(request: web.Request) -> web.Response:
    """{"by": login}: merge (fast-forward the base branch) and close the pull request."""
    sandbox = _sandbox(request)
    data = await _body(request)
    repo = _repo(sandbox, request)
    actor = sandbox.world.user(str(data.get("by", repo.owner.login)))
    outcome = sandbox.ops.close_pull(repo, actor, int(request.match_info["number"]), merge=True)
    sandbox.emit(outcome.hooks)
    return web.json_response(outcome.body)


@routes.post(
    PREFIX + r"/repos/{owner}/{repo}/pulls/{number:\d+}/reviews/{review_id:\d+}/dismissals"
)
async def dismiss_review(request: web.Request) -> web.Response:
    """{"by": login, "message"}: dismiss a submitted review as that person (GitHub's
    `PUT .../reviews/{review_id}/dismissals`, which the trimmed description lacks)."""
    sandbox = _sandbox(request)
    data = await _body(request)
    repo = _repo(sandbox, request)
    actor = sandbox.world.user(str(data.get("by", repo.owner.login)))
    number, review_id = int(request.match_info["number"]), int(request.match_info["review_id"])
    message = str(data.get("message") or "")
    outcome = Reviews(sandbox.ops).dismiss_review(repo, actor, number, review_id, message)
    sandbox.emit(outcome.hooks)
    return web.json_response(outcome.body)


@routes.get(PREFIX + "/deliveries")
async def deliveries(request: web.Request) -> web.Response:
    sandbox = _sandbox(request)
    return web.json_response(
        [
            {"id": d.id, "event": d.event, "action": d.action, "status": d.status, "error": d.error}
            for d in sandbox.hooks.sent
        ]
    )


@routes.post(PREFIX + "/deliveries/{delivery_id}/redeliver")
async def redeliver(request: web.Request) -> web.Response:
    sandbox = _sandbox(request)
    try:
        delivery = sandbox.hooks.redeliver(request.match_info["delivery_id"])
    except StopIteration as exc:
        raise not_found() from exc
    return web.json_response({"id": delivery.id}, status=202)
