"""Web GUI sign-in: operator token -> HttpOnly SameSite=Strict cookie; the operator API
accepts the cookie with a CSRF header on state-changing requests; sign-out ends it at once.
Also the page's security headers and the static files' caching and vendored digests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.config_values import ConfigError
from bot.models import WebSession
from tests.conftest import ApiClient, make_settings
from web_gui.assets import ASSETS

VENDOR = Path(__file__).resolve().parents[1] / "web_gui" / "static" / "vendor"
AXE_VENDOR = Path(__file__).resolve().parent / "browser" / "vendor"


async def sign_in(api: ApiClient) -> tuple[dict[str, Any], Any]:
    response = await api.raw.post("/gui/session", json={"token": api.token})
    assert response.status == 200, await response.text()
    return await response.json(), response


def csrf_headers(api: ApiClient, token: str) -> dict[str, str]:
    return {"X-CSRF-Token": token}


async def test_sign_in_sets_a_strict_httponly_cookie_and_a_csrf_token(api: ApiClient) -> None:
    body, response = await sign_in(api)
    cookies = response.headers.getall("Set-Cookie")
    session = next(c for c in cookies if c.startswith("steelframe_session="))
    csrf = next(c for c in cookies if c.startswith("steelframe_csrf="))
    assert "HttpOnly" in session and "SameSite=Strict" in session and "Path=/" in session
    assert "HttpOnly" not in csrf and "SameSite=Strict" in csrf
    assert body["csrf_token"] and body["operator"].startswith("op-")
    assert body["agents"] == [{"name": "default", "repo": "steelframe-dev/sandbox"}]
    # Only a digest is stored: the cookie value is nowhere in the database.
    value = session.split(";")[0].split("=", 1)[1]
    rows = api.services.db.call(lambda s: s.query(WebSession).all())
    assert len(rows) == 1 and rows[0].token_hash == hashlib.sha256(value.encode()).hexdigest()
    who = await (await api.raw.get("/gui/session")).json()
    assert who["csrf_token"] == body["csrf_token"]


async def test_the_cookie_reads_and_needs_csrf_to_write(api: ApiClient) -> None:
    body, response = await sign_in(api)
    raw = api.raw
    session_cookie = response.cookies["steelframe_session"].value
    assert (await raw.get("/api/operator/chat/sessions")).status == 200
    refused = await raw.post("/api/operator/chat/new", json={})
    assert refused.status == 403
    assert (await refused.json())["code"] == "forbidden"
    wrong = await raw.post("/api/operator/chat/new", json={}, headers={"X-CSRF-Token": "nope"})
    assert wrong.status == 403
    listed = await (await raw.get("/api/operator/chat/sessions")).json()
    assert listed["sessions"] == []  # the refused requests changed nothing
    made = await raw.post(
        "/api/operator/chat/new", json={}, headers=csrf_headers(api, body["csrf_token"])
    )
    assert made.status == 201
    # Double submit: the header must also equal the CSRF cookie the browser holds.
    raw.session.cookie_jar.clear()
    mismatch = await raw.post(
        "/api/operator/chat/new",
        json={},
        headers={
            "X-CSRF-Token": body["csrf_token"],
            "Cookie": f"steelframe_session={session_cookie}; steelframe_csrf=other",
        },
    )
    assert mismatch.status == 403


async def test_bearer_tokens_still_work_and_win_over_a_cookie(api: ApiClient) -> None:
    await sign_in(api)
    other = api.new_operator("someone-else")
    mine = await (await other.post("/api/operator/chat/new", json={})).json()
    # The bearer request is the other operator's, cookie or not; it needs no CSRF header.
    listed = await (await other.get("/api/operator/chat/sessions")).json()
    assert [s["id"] for s in listed["sessions"]] == [mine["id"]]
    as_cookie = await (await api.raw.get("/api/operator/chat/sessions")).json()
    assert as_cookie["sessions"] == []


async def test_sign_out_ends_the_session_at_once(api: ApiClient) -> None:
    body, response = await sign_in(api)
    cookie = next(
        c for c in response.headers.getall("Set-Cookie") if c.startswith("steelframe_session=")
    ).split(";")[0]
    refused = await api.raw.delete("/gui/session")
    assert refused.status == 403  # sign-out is state-changing too
    out = await api.raw.delete("/gui/session", headers=csrf_headers(api, body["csrf_token"]))
    assert out.status == 200 and await out.json() == {"signed_out": True}
    # A copy of the old cookie is worthless now.
    replay = await api.raw.get("/api/operator/chat/sessions", headers={"Cookie": cookie})
    assert replay.status == 401
    assert api.services.db.call(lambda s: s.query(WebSession).count()) == 0


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"token": "sfo_wrong"}, 401),
        ({"token": ""}, 400),
        ({"token": 5}, 400),
        ({}, 400),
        ({"token": "x", "extra": 1}, 400),
    ],
)
async def test_bad_sign_ins_are_clear_4xx_and_store_nothing(
    api: ApiClient, body: dict[str, Any], status: int
) -> None:
    response = await api.raw.post("/gui/session", json=body)
    assert response.status == status
    assert set(await response.json()) >= {"error", "detail"}
    assert "Set-Cookie" not in response.headers
    assert api.services.db.call(lambda s: s.query(WebSession).count()) == 0


async def test_sign_in_from_another_origin_is_refused(api: ApiClient) -> None:
    response = await api.raw.post(
        "/gui/session", json={"token": api.token}, headers={"Origin": "https://evil.example"}
    )
    assert response.status == 403
    assert api.services.db.call(lambda s: s.query(WebSession).count()) == 0


async def test_oversized_sign_in_is_413(api: ApiClient) -> None:
    response = await api.raw.post("/gui/session", data=json.dumps({"token": "x" * 10_000}))
    assert response.status == 413


async def test_a_forged_or_absent_cookie_is_401(api: ApiClient) -> None:
    for cookie in ("steelframe_session=sfw_forged", "steelframe_session=garbage"):
        response = await api.raw.get("/api/operator/board", headers={"Cookie": cookie})
        assert response.status == 401
    assert (await api.raw.get("/gui/session")).status == 401


async def test_the_page_has_a_strict_csp_and_hashed_assets(api: ApiClient) -> None:
    page = await api.raw.get("/")
    assert page.status == 200 and page.headers["Cache-Control"] == "no-cache"
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.headers["X-Frame-Options"] == "DENY"
    html = await page.text()
    assets = api.raw.app[ASSETS]
    assert f"/gui/static/{assets.version}/app.js" in html and "<script>" not in html
    current = await api.raw.get(f"/gui/static/{assets.version}/app.js")
    assert current.status == 200 and "immutable" in current.headers["Cache-Control"]
    assert current.headers["Content-Type"].startswith("text/javascript")
    stale = await api.raw.get("/gui/static/0000/app.js")
    assert stale.status == 200 and stale.headers["Cache-Control"] == "no-cache"
    for missing in ("/gui/static/x/nope.js", "/gui/static/x/../../__init__.py"):
        response = await api.raw.get(missing)
        assert response.status == 404 and (await response.json())["code"] == "not_found"


@pytest.mark.parametrize("folder", [VENDOR, AXE_VENDOR])
def test_vendored_browser_code_matches_its_pinned_npm_digests(folder: Path) -> None:
    manifest = json.loads((folder / "VENDOR.json").read_text())
    for package in manifest["packages"]:
        assert (folder / package["license_file"]).is_file()
        assert package["version"] and package["tarball_sha256"]
        for name, entry in package["files"].items():
            digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
            assert digest == entry["sha256"], f"{name} differs from {package['name']}"


@pytest.mark.postgres
async def test_cookie_sessions_on_postgresql(api_factory: Any, tmp_path: Path, pg_url: str) -> None:
    from tests.conftest import make_settings

    api = await api_factory(make_settings(tmp_path, database_url=pg_url))
    body, _ = await sign_in(api)
    made = await api.raw.post(
        "/api/operator/chat/new", json={}, headers={"X-CSRF-Token": body["csrf_token"]}
    )
    assert made.status == 201
    out = await api.raw.delete("/gui/session", headers={"X-CSRF-Token": body["csrf_token"]})
    assert out.status == 200
    assert (await api.raw.get("/api/operator/chat/sessions")).status == 401


async def test_behind_a_tls_proxy_the_public_origin_signs_in_with_secure_cookies(
    api_factory: Any, tmp_path: Path
) -> None:
    """The proxy speaks plain HTTP to the service; browsers send the public https origin."""
    public = "https://steelframe.example.com"
    api = await api_factory(make_settings(tmp_path, public_url=public))
    spoofed = await api.raw.post(
        "/gui/session",
        json={"token": api.token},
        headers={"Origin": f"http://{api.raw.host}:{api.raw.port}", "X-Forwarded-Proto": "https"},
    )
    assert spoofed.status == 403  # the service's own view is not the public origin any more
    response = await api.raw.post(
        "/gui/session", json={"token": api.token}, headers={"Origin": public}
    )
    assert response.status == 200, await response.text()
    cookies = response.headers.getall("Set-Cookie")
    assert all(
        "Secure" in c for c in cookies if c.startswith(("steelframe_session=", "steelframe_csrf="))
    )
    assert len(cookies) == 2


async def test_without_a_public_url_plain_http_cookies_are_not_secure(api: ApiClient) -> None:
    _, response = await sign_in(api)
    assert not any("Secure" in c for c in response.headers.getall("Set-Cookie"))


def test_a_public_url_with_a_path_or_another_scheme_is_refused(tmp_path: Path) -> None:
    for bad in ("steelframe.example.com", "ftp://x.example", "https://x.example/gui"):
        with pytest.raises(ConfigError, match="STEELFRAME_PUBLIC_URL"):
            Settings.from_env({"STEELFRAME_PUBLIC_URL": bad})
    assert Settings.from_env({"STEELFRAME_PUBLIC_URL": "https://x.example/"}).public_url == (
        "https://x.example"
    )


# -- sign-in links: one-time codes, bound to the browser that claimed them (issue 35) -------


def other_browser(api: ApiClient) -> Any:
    """A second browser: its own cookie jar."""
    import aiohttp

    return aiohttp.ClientSession(
        str(api.raw.make_url("/")), cookie_jar=aiohttp.CookieJar(unsafe=True)
    )


async def mint_code(api: ApiClient) -> str:
    response = await api.raw.post(
        "/api/operator/sign-in-codes", headers={"Authorization": f"Bearer {api.token}"}
    )
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["expires_in"] == 120
    return str(body["code"])


async def test_a_link_code_is_claimed_confirmed_and_used_once(api: ApiClient) -> None:
    code = await mint_code(api)
    async with other_browser(api) as browser:
        claimed = await browser.post("/gui/link", json={"code": code})
        assert claimed.status == 200 and (await claimed.json())["operator"].startswith("op-")
        nonce = claimed.headers["Set-Cookie"]
        assert "HttpOnly" in nonce and "SameSite=Strict" in nonce and "Path=/gui/link" in nonce
        # Claimed: nobody else can claim it, and claiming alone signed nobody in.
        async with other_browser(api) as thief:
            assert (await thief.post("/gui/link", json={"code": code})).status == 401
            assert (await thief.post("/gui/link/confirm", json={})).status == 401
        assert (await browser.get("/gui/session")).status == 401
        signed = await browser.post("/gui/link/confirm", json={})
        assert signed.status == 200, await signed.text()
        assert (await browser.get("/api/operator/board")).status == 200
        # Used: neither the code nor the nonce works again.
        assert (await browser.post("/gui/link/confirm", json={})).status == 401
        assert (await browser.post("/gui/link", json={"code": code})).status == 401


async def test_a_link_code_expires(api: ApiClient) -> None:
    from datetime import timedelta

    from bot.sign_in_codes import SignInCode

    code = await mint_code(api)

    def age(session: Any) -> None:
        for row in session.query(SignInCode):
            row.expires_at -= timedelta(minutes=3)

    api.services.db.call(age)
    answer = await api.raw.post("/gui/link", json={"code": code})
    assert answer.status == 401 and "expired" in (await answer.json())["error"]


async def test_a_link_from_another_origin_is_refused(api: ApiClient) -> None:
    code = await mint_code(api)
    answer = await api.raw.post(
        "/gui/link", json={"code": code}, headers={"Origin": "https://evil.example"}
    )
    assert answer.status == 403
    # Refused before the claim: the code still works from our own page.
    assert (await api.raw.post("/gui/link", json={"code": code})).status == 200


async def test_minting_a_code_needs_a_token(api: ApiClient) -> None:
    assert (await api.raw.post("/api/operator/sign-in-codes")).status == 401
