"""The manifest flow's two ends: GitHub's web page that takes the manifest form (a web page,
not REST: never contract-checked) and the REST conversion of the code it hands back."""

from __future__ import annotations

from aiohttp import web

from github_sandbox.appkeys import SANDBOX
from github_sandbox.operations import SandboxError
from github_sandbox.registration import parse_manifest, redirect_with_code

# Web pages, as opposed to REST operations (the recorder and the contract skip them).
web_routes = web.RouteTableDef()
routes = web.RouteTableDef()
FORM_LIMIT = 64 * 1024


async def _confirm(request: web.Request, org: str | None) -> web.Response:
    if (request.content_length or 0) > FORM_LIMIT:
        raise SandboxError(413, "manifest too large")
    form = await request.post()
    raw = form.get("manifest")
    if not isinstance(raw, str):
        raise SandboxError(422, "Invalid manifest: the form has no manifest field")
    manifest = parse_manifest(raw)
    # GitHub asks the person to confirm; the sandbox confirms at once and redirects.
    code = request.app[SANDBOX].start_registration(manifest, org)
    raise web.HTTPFound(redirect_with_code(manifest, code, request.query.get("state")))


@web_routes.post("/settings/apps/new")
async def new_app_for_user(request: web.Request) -> web.Response:
    return await _confirm(request, None)


@web_routes.post("/organizations/{org}/settings/apps/new")
async def new_app_for_organization(request: web.Request) -> web.Response:
    return await _confirm(request, request.match_info["org"])


@routes.post("/app-manifests/{code}/conversions")
async def create_from_manifest(request: web.Request) -> web.Response:
    """No authentication: the one-time code is the credential."""
    sandbox = request.app[SANDBOX]
    registered = sandbox.convert_registration(request.match_info["code"])
    body = {
        **sandbox.shapes.app(registered.app),
        "client_id": registered.client_id,
        "client_secret": registered.client_secret,
        "webhook_secret": registered.webhook_secret,
        "pem": registered.private_key,
    }
    return web.json_response(body, status=201)
