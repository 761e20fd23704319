"""A credential or CSRF header whose bytes are not UTF-8 is a wrong credential: 401 (counted
by the failed-authentication throttle like any other) or 403 for the CSRF header, with a
JSON message, never an unauthenticated 500; and nothing is signed in, out or stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.config_values import Secret
from tests.conftest import ApiClient, make_settings
from tests.raw_http import RawAnswer, request_bytes, send_raw

METRICS_TOKEN = "scrape-me"
NOT_UTF8 = b"\xff\xfe"


@pytest.fixture
async def api(api_factory: Callable[..., Any], tmp_path: Path, redis_url: str) -> ApiClient:
    """The app with its throttle in Redis, where a test can read the failure counts."""
    return await api_factory(
        make_settings(tmp_path, redis_url=redis_url, metrics_token=Secret(METRICS_TOKEN))
    )


async def send(api: ApiClient, method: str, path: str, headers: dict[str, bytes]) -> RawAnswer:
    body = b"{}" if method == "POST" else b""
    if body:
        headers = {"Content-Type": b"application/json", **headers}
    return await send_raw(api.raw.server, request_bytes(method, path, headers, body))


def failures_counted(redis_url: str) -> int:
    """Failed authentications the throttle counted against this test's client address."""
    client = redis.Redis.from_url(redis_url)
    try:
        return sum(int(client.get(key) or 0) for key in client.keys("steelframe:auth:count:addr:*"))
    finally:
        client.close()


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/api/operator/board", {"Authorization": b"Bearer " + NOT_UTF8}),
        ("POST", "/api/operator/chat/new", {"Authorization": b"Bearer sfo_" + NOT_UTF8}),
        ("GET", "/api/operator/board", {"Cookie": b"steelframe_session=sfs_\xff"}),
        ("GET", "/api/operator/board", {"Cookie": b"steelframe_session=sfw_\xff"}),
        ("GET", "/gui/session", {"Cookie": b"steelframe_session=sfw_\xff"}),
        ("POST", "/gui/link/confirm", {"Cookie": b"steelframe_link=\xff"}),
        ("GET", "/metrics", {"Authorization": b"Bearer " + NOT_UTF8}),
    ],
)
async def test_a_credential_that_is_not_utf8_is_a_counted_401(
    api: ApiClient, redis_url: str, method: str, path: str, headers: dict[str, bytes]
) -> None:
    answer = await send(api, method, path, headers)
    assert answer.status == 401, answer.body
    error = answer.json()
    assert error["code"] == "unauthorized" and error["error"]
    assert failures_counted(redis_url) == 1
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []


async def test_signing_out_with_a_cookie_that_is_not_utf8_is_a_401(api: ApiClient) -> None:
    answer = await send(api, "DELETE", "/gui/session", {"Cookie": b"steelframe_session=sfw_\xff"})
    assert answer.status == 401, answer.body
    assert answer.json()["code"] == "unauthorized"


async def signed_in_cookie(api: ApiClient) -> tuple[bytes, str]:
    """A browser session's Cookie header (session and CSRF cookies) and its CSRF token."""
    response = await api.raw.post("/gui/session", json={"token": api.token})
    assert response.status == 200, await response.text()
    csrf = (await response.json())["csrf_token"]
    session = response.cookies["steelframe_session"].value
    return f"steelframe_session={session}; steelframe_csrf={csrf}".encode(), csrf


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/api/operator/chat/new"), ("DELETE", "/gui/session")]
)
async def test_a_csrf_header_that_is_not_utf8_is_a_403_that_changes_nothing(
    api: ApiClient, method: str, path: str
) -> None:
    cookie, _ = await signed_in_cookie(api)
    answer = await send(api, method, path, {"Cookie": cookie, "X-CSRF-Token": b"\xff"})
    assert answer.status == 403, answer.body
    error = answer.json()
    assert error["code"] == "forbidden" and "CSRF" in error["error"]
    # No session made, and the browser is still signed in.
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []
    still = await send(api, "GET", "/gui/session", {"Cookie": cookie})
    assert still.status == 200, still.body
