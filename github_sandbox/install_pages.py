"""GitHub's App pages on the sandbox: `/apps/{slug}` and its install flow
(`/apps/{slug}/installations/new`), the link `steelframe github register` and the docs print
after registering. Any App on the sandbox can be installed this way: the first App gains the
repositories' `installation_id` (as `POST /_sandbox/installations` does); Apps 2, 3… get an
installation of their own (`apps.py`), announced to their own webhook.

Web pages, not the REST API (never recorded, rate-limited or given injected faults). A page
carries no credentials, so the install form proves it came from the page with a token (an
HMAC of the sandbox's secret and the App) and, when the browser says, the same origin.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.apps import install_other_app
from github_sandbox.operations import HookEvent, SandboxError, not_found
from github_sandbox.pages import PAGE, render
from github_sandbox.pull_forms import refuse, same_origin
from github_sandbox.sandbox import Sandbox
from github_sandbox.state import AppInfo, Installation, Repo

routes = web.RouteTableDef()
MAX_REPOS = 100


def _app(request: web.Request) -> AppInfo:
    found = request.app[SANDBOX].world.app_by_slug(request.match_info["slug"])
    if found is None:
        raise not_found()
    return found


def install_token(sandbox: Sandbox, app: AppInfo) -> str:
    return hmac.new(sandbox.url_secret, f"install:{app.slug}".encode(), hashlib.sha256).hexdigest()


@routes.get("/apps/{slug}", name=f"{PAGE}:app")
async def app_page(request: web.Request) -> web.Response:
    sandbox: Sandbox = request.app[SANDBOX]
    app = _app(request)
    installed = sandbox.world.installations.get(_number(request.query.get("installed", "")))
    return render(
        "app.html.j2",
        app=app,
        installations=sandbox.world.installations_of(app),
        installed=installed if installed and sandbox.world.app_of(installed) is app else None,
    )


@routes.get("/apps/{slug}/installations/new", name=f"{PAGE}:install")
async def install_page(request: web.Request) -> web.Response:
    sandbox: Sandbox = request.app[SANDBOX]
    app = _app(request)
    covered = {name for inst in sandbox.world.installations_of(app) for name in inst.repos}
    repos = sorted(sandbox.world.repos.values(), key=lambda r: r.full_name.lower())
    return render(
        "install.html.j2",
        app=app,
        repos=repos,
        installed=covered,
        token=install_token(sandbox, app),
    )


@routes.post("/apps/{slug}/installations", name=f"{PAGE}:install-form")
async def install_form(request: web.Request) -> web.Response:
    sandbox: Sandbox = request.app[SANDBOX]
    app = _app(request)
    form = await request.post()
    token = form.get("token")
    good = install_token(sandbox, app)
    if not same_origin(request) or not isinstance(token, str):
        return refuse("This form did not come from the sandbox's page; nothing was done.")
    if not hmac.compare_digest(good, token):
        return refuse("This form did not come from the sandbox's page; nothing was done.")
    repos = _chosen(sandbox, [v for v in form.getall("repos", []) if isinstance(v, str)])
    inst = install(sandbox, app, repos)
    # Answered, not raised: the persisting middleware saves the world after an answer.
    return web.Response(status=303, headers={"Location": f"/apps/{app.slug}?installed={inst.id}"})


def _chosen(sandbox: Sandbox, names: list[str]) -> list[Repo]:
    if not names:
        raise SandboxError(400, "choose at least one repository")
    if len(names) > MAX_REPOS:
        raise SandboxError(400, f"at most {MAX_REPOS} repositories at once")
    repos = []
    for name in names:
        repo = sandbox.world.repo(name)
        if repo is None:
            raise SandboxError(400, f"no repository {name} on this sandbox")
        repos.append(repo)
    if len({repo.owner.login.lower() for repo in repos}) > 1:
        raise SandboxError(400, "an installation belongs to one account: choose its repositories")
    return repos


def install(sandbox: Sandbox, app: AppInfo, repos: list[Repo]) -> Installation:
    """Install `app` on the repositories' account; installing again adds repositories to the
    same installation (nothing is sent for one already covered)."""
    account = repos[0].owner
    if app is sandbox.world.app:
        found = next((i for i in sandbox.world.installations_of(app) if i.account is account), None)
        inst = found or sandbox.install(account.login, account_type=account.type)
        for repo in repos:
            if repo.full_name.lower() not in inst.repos:
                sandbox.grant_installation(inst, repo)
        return inst
    before = {i.id: set(i.repos) for i in sandbox.world.installations_of(app)}
    inst = install_other_app(sandbox.world, app, account, repos, sandbox.clock())
    added = [r for r in repos if r.full_name.lower() not in before.get(inst.id, set())]
    sender = sandbox.other_hooks.sender(app)
    if inst.id not in before:
        sender.enqueue([_hook("installation", "created", sandbox, app, inst, added)])
    elif added:
        sender.enqueue([_hook("installation_repositories", "added", sandbox, app, inst, added)])
    return inst


def _hook(
    event: str, action: str, sandbox: Sandbox, app: AppInfo, inst: Installation, repos: list[Repo]
) -> HookEvent:
    lite = [sandbox.shapes.repo_lite(repo) for repo in repos]
    payload: dict[str, Any] = {
        "action": action,
        "installation": sandbox.shapes.installation(app, inst),
        "sender": sandbox.shapes.user(inst.account),
    }
    if event == "installation":
        payload["repositories"] = lite
    else:
        payload |= {
            "repository_selection": "selected",
            "repositories_added": lite,
            "repositories_removed": [],
            "requester": None,
        }
    return HookEvent(event, payload)


def _number(raw: str) -> int:
    return int(raw) if raw.isdigit() else -1
