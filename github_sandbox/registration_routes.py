"""GitHub's web page that takes the manifest form (`/settings/apps/new`, or an
organization's). A web page, not REST: never rate-limited, recorded or contract-checked. The
REST end of the flow, the code conversion, is in `rest_routes`."""

from __future__ import annotations

from aiohttp import web

from github_sandbox import registration
from github_sandbox.appkeys import SANDBOX
from github_sandbox.operations import SandboxError

web_routes = web.RouteTableDef()
FORM_LIMIT = 64 * 1024


async def _confirm(request: web.Request, owner: str | None = None) -> web.Response:
    if (request.content_length or 0) > FORM_LIMIT:
        raise SandboxError(413, "manifest too large")
    form = await request.post()
    raw = form.get("manifest")
    if not isinstance(raw, str):
        raise SandboxError(422, "Invalid manifest: the form has no manifest field")
    manifest = registration.parse_manifest(raw)
    # GitHub asks the person to confirm; the sandbox confirms at once and redirects.
    code = registration.manifest_code(request.app[SANDBOX], manifest, owner)
    raise web.HTTPFound(registration.redirect_with_code(manifest, code, request.query.get("state")))


@web_routes.post("/settings/apps/new")
async def new_app_for_user(request: web.Request) -> web.Response:
    return await _confirm(request)


@web_routes.post("/organizations/{org}/settings/apps/new")
async def new_app_for_organization(request: web.Request) -> web.Response:
    return await _confirm(request, request.match_info["org"])
