"""HTTP routes of the web GUI: the page, its static files, and sign-in/sign-out.

Sign-in exchanges an operator token for a session cookie (HttpOnly, SameSite=Strict) and
hands the page a CSRF token; the operator API then accepts the cookie (operator_api.auth;
the cookie names and the CSRF check are the edge's, http_edge.cookies).
A link signs in with a one-time code instead of a token (`bot.sign_in_codes`): the page
claims it (binding it to this browser by a nonce cookie), shows whose account it is, and
redeems it when the person confirms.
"""

from __future__ import annotations

import logging
from pathlib import Path

import jinja2
from aiohttp import web

from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest, Forbidden, NotFound, Unauthorized
from bot.sign_in_codes import CODE_LIFETIME, claim, mint, redeem
from bot.web_sessions import SESSION_LIFETIME, WebSignIn, identify, sign_in, sign_out
from http_edge.cookies import CSRF_COOKIE, SESSION_COOKIE, require_csrf
from http_edge.credentials import OPERATOR_ID, checked
from http_edge.validation import read_json, reject_unknown
from web_gui.assets import ASSETS
from web_gui.deps import GUI

log = logging.getLogger("steelframe.gui")
routes = web.RouteTableDef()
SIGN_IN_BODY_LIMIT = 4096
# The claiming browser's nonce (`bot.sign_in_codes`), sent only to the redeem route.
LINK_COOKIE = "steelframe_link"
LINK_PATH = "/gui/link"
# No inline script or style anywhere: untrusted text that slipped past the sanitiser still
# could not run. connect-src 'self' covers fetch and EventSource to this origin only.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


@routes.get("/")
async def index(request: web.Request) -> web.Response:
    assets = request.app[ASSETS]
    html = _TEMPLATES.get_template("index.html.j2").render(
        app_js=assets.url("app.js"), style_css=assets.url("style.css")
    )
    # The page names the current asset version, so it must never be cached itself.
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
    return web.Response(text=html, content_type="text/html", headers=headers)


@routes.get("/gui/static/{version}/{name:.+}")
async def static(request: web.Request) -> web.Response:
    assets = request.app[ASSETS]
    asset = assets.files.get(request.match_info["name"])
    if asset is None:
        raise NotFound("no such GUI file")
    current = request.match_info["version"] == assets.version
    cache = "public, max-age=31536000, immutable" if current else "no-cache"
    return web.Response(
        body=asset.body,
        headers={
            "Content-Type": asset.content_type,
            "Cache-Control": cache,
            "X-Content-Type-Options": "nosniff",
        },
    )


@routes.post("/gui/session")
async def create_session(request: web.Request) -> web.Response:
    _same_origin(request)
    data = await read_json(request, limit=SIGN_IN_BODY_LIMIT)
    reject_unknown(data, {"token"})
    token = data.get("token")
    if not isinstance(token, str) or not token.strip():
        raise BadRequest("token is required", detail=ErrorDetail(field="token"))
    token = token.strip()
    signed = await checked(request, token, lambda: request.app[GUI].db.run(sign_in, token))
    log.info("operator %s signed in to the web GUI", signed.operator_id)
    return _signed_in(request, signed)


def _signed_in(request: web.Request, signed: WebSignIn) -> web.Response:
    """The answer that starts a browser session: who, the CSRF token, and both cookies."""
    response = web.json_response(_who(request, signed.operator_name, signed.csrf_token))
    secure = _public_origin(request).startswith("https://")
    max_age = int(SESSION_LIFETIME.total_seconds())
    response.set_cookie(
        SESSION_COOKIE,
        signed.cookie,
        httponly=True,
        samesite="Strict",
        secure=secure,
        path="/",
        max_age=max_age,
    )
    # Readable by the page on purpose: it echoes it in X-CSRF-Token (double submit).
    response.set_cookie(
        CSRF_COOKIE, signed.csrf_token, samesite="Strict", secure=secure, path="/", max_age=max_age
    )
    return response


@routes.post("/api/operator/sign-in-codes")
async def create_sign_in_code(request: web.Request) -> web.Response:
    """A one-time code for a sign-in link (`/#code=...`), minted by a token holder."""
    data = await read_json(request, limit=SIGN_IN_BODY_LIMIT, required=False)
    reject_unknown(data, set())
    minted = await request.app[GUI].db.run(mint, request[OPERATOR_ID])
    return web.json_response({"code": minted.code, "expires_in": minted.expires_in})


@routes.post(LINK_PATH)
async def claim_link(request: web.Request) -> web.Response:
    """Step 1 of a link's sign-in: bind the code to this browser; say whose account it is."""
    _same_origin(request)
    data = await read_json(request, limit=SIGN_IN_BODY_LIMIT)
    reject_unknown(data, {"code"})
    code = data.get("code")
    if not isinstance(code, str) or not code.strip():
        raise BadRequest("code is required", detail=ErrorDetail(field="code"))
    code = code.strip()
    claimed = await checked(request, code, lambda: request.app[GUI].db.run(claim, code))
    response = web.json_response({"operator": claimed.operator_name})
    response.headers["Cache-Control"] = "no-store"
    response.set_cookie(
        LINK_COOKIE,
        claimed.nonce,
        httponly=True,
        samesite="Strict",
        secure=_public_origin(request).startswith("https://"),
        path=LINK_PATH,
        max_age=int(CODE_LIFETIME.total_seconds()),
    )
    return response


@routes.post(f"{LINK_PATH}/confirm")
async def confirm_link(request: web.Request) -> web.Response:
    """Step 2: the person confirmed; the browser that claimed the code is signed in."""
    _same_origin(request)
    data = await read_json(request, limit=SIGN_IN_BODY_LIMIT, required=False)
    reject_unknown(data, set())
    nonce = request.cookies.get(LINK_COOKIE, "")
    signed = await checked(request, nonce, lambda: request.app[GUI].db.run(redeem, nonce))
    log.info("operator %s signed in to the web GUI with a link", signed.operator_id)
    response = _signed_in(request, signed)
    response.del_cookie(LINK_COOKIE, path=LINK_PATH)
    return response


@routes.get("/gui/session")
async def current_session(request: web.Request) -> web.Response:
    cookie = _cookie(request)
    identity = await checked(request, cookie, lambda: request.app[GUI].db.run(identify, cookie))
    response = web.json_response(_who(request, identity.operator_name, identity.csrf_token))
    response.headers["Cache-Control"] = "no-store"
    return response


@routes.delete("/gui/session")
async def delete_session(request: web.Request) -> web.Response:
    cookie = _cookie(request)
    identity = await request.app[GUI].db.run(identify, cookie)
    require_csrf(request, identity.csrf_token)
    await request.app[GUI].db.run(sign_out, cookie)
    log.info("operator %s signed out of the web GUI", identity.operator_id)
    response = web.json_response({"signed_out": True})
    response.del_cookie(SESSION_COOKIE, path="/")
    response.del_cookie(CSRF_COOKIE, path="/")
    return response


def _cookie(request: web.Request) -> str:
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise Unauthorized("not signed in")
    return cookie


def _same_origin(request: web.Request) -> None:
    """Browsers send Origin on every POST: a sign-in posted from another site is refused
    (login CSRF would sign the victim in as the attacker)."""
    origin = request.headers.get("Origin")
    if origin is not None and origin != _public_origin(request):
        raise Forbidden("sign-in from another origin is refused", detail=ErrorDetail(origin=origin))


def _public_origin(request: web.Request) -> str:
    """The origin browsers use: STEELFRAME_PUBLIC_URL behind a TLS proxy, else what we see."""
    configured = request.app[GUI].settings.public_url
    return configured or f"{request.scheme}://{request.host}"


def _who(request: web.Request, name: str, csrf: str) -> dict[str, object]:
    agents = request.app[GUI].settings.agents
    return {
        "operator": name,
        "csrf_token": csrf,
        "agents": [{"name": a.name, "repo": a.repo} for a in agents.values()],
    }
