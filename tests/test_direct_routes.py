"""Routes served before URL dispatch and middlewares (steelframe.direct_routes): only the
declared method and path skip the chain, errors keep the JSON shape and request id, and
the webhook endpoint is one of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import func, select

from bot.config_values import Secret
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest
from http_edge.appkeys import DIRECT_ROUTES
from http_edge.errors import Handler, errors_middleware
from tests.conftest import WEBHOOK_SECRET, QuietTestServer, make_settings, webhook_headers
from webhooks.deliveries import WebhookDelivery

PATH = "/direct"


def recording_app(passed: list[str]) -> web.Application:
    """An app whose middleware notes each request it sees, with one route declared direct
    (and registered in the router too, as webhooks.setup does)."""

    @web.middleware
    async def recorder(request: web.Request, handler: Handler) -> web.StreamResponse:
        passed.append(f"{request.method} {request.path}")
        return await handler(request)

    async def direct(request: web.Request) -> web.StreamResponse:
        if request.headers.get("fail") == "bad":
            raise BadRequest("a bad direct request", detail=ErrorDetail(reason="asked"))
        if request.headers.get("fail") == "crash":
            raise RuntimeError("internal detail that must not leak")
        return web.json_response({"direct": True, "body": (await request.read()).decode()})

    async def other(request: web.Request) -> web.StreamResponse:
        return web.json_response({"direct": False})

    app = web.Application(middlewares=[errors_middleware, recorder])
    app.router.add_post(PATH, direct)
    app.router.add_get("/other", other)
    app[DIRECT_ROUTES] = {("POST", PATH): direct}
    return app


@pytest.fixture
async def direct_client(aiohttp_client: Any) -> tuple[Any, list[str]]:
    passed: list[str] = []
    return await aiohttp_client(QuietTestServer(recording_app(passed))), passed


async def test_declared_route_skips_the_middleware_chain(direct_client: Any) -> None:
    client, passed = direct_client
    response = await client.post(PATH, data=b"hello")
    assert response.status == 200
    assert await response.json() == {"direct": True, "body": "hello"}
    assert response.headers["X-Request-Id"]  # errors_middleware still gives the request id
    assert passed == []


async def test_other_routes_and_methods_go_through_the_middlewares(direct_client: Any) -> None:
    client, passed = direct_client
    assert (await client.get("/other")).status == 200
    not_allowed = await client.get(PATH)
    assert not_allowed.status == 405
    assert (await not_allowed.json())["code"] == "method_not_allowed"
    missing = await client.post("/nowhere")
    assert missing.status == 404
    assert passed == ["GET /other", f"GET {PATH}", "POST /nowhere"]


async def test_a_query_takes_the_routed_way(direct_client: Any) -> None:
    # Matched on the path as sent: anything else is left to aiohttp's router, same answer.
    client, passed = direct_client
    assert (await client.post(PATH, params={"a": "1"})).status == 200
    assert passed == [f"POST {PATH}"]


async def test_expect_continue_takes_the_routed_way(direct_client: Any) -> None:
    # aiohttp answers `Expect: 100-continue` while routing; the direct way would skip it.
    client, passed = direct_client
    response = await client.post(PATH, data=b"x" * 2048, headers={"Expect": "100-continue"})
    assert response.status == 200
    assert passed == [f"POST {PATH}"]


async def test_direct_errors_are_json_with_a_request_id(direct_client: Any) -> None:
    client, passed = direct_client
    bad = await client.post(PATH, headers={"fail": "bad", "X-Request-Id": "req-1"})
    assert bad.status == 400
    assert bad.headers["X-Request-Id"] == "req-1"
    assert await bad.json() == {
        "error": "a bad direct request",
        "code": "bad_request",
        "detail": {"reason": "asked"},
    }
    crash = await client.post(PATH, headers={"fail": "crash"})
    assert crash.status == 500
    body = await crash.json()
    assert body["code"] == "internal_error" and "internal detail" not in json.dumps(body)
    assert body["detail"]["request_id"] == crash.headers["X-Request-Id"]
    assert passed == []


async def test_webhook_endpoint_is_served_directly(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    hooks = await api_factory(make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET)))
    assert ("POST", "/api/github/webhooks") in hooks.raw.app[DIRECT_ROUTES]
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode()
    forged = webhook_headers(body, "ping", secret="not-the-secret")
    refused = await hooks.raw.post("/api/github/webhooks", data=body, headers=forged)
    assert refused.status == 401
    assert (await refused.json())["error"] == "X-Hub-Signature-256 does not match the body"
    assert refused.headers["X-Request-Id"]
    stored = hooks.services.db.call(
        lambda s: s.scalar(select(func.count()).select_from(WebhookDelivery))
    )
    assert stored == 0
    accepted = await hooks.raw.post(
        "/api/github/webhooks", data=body, headers=webhook_headers(body, "ping")
    )
    assert accepted.status == 202
    assert (await accepted.json())["status"] == "accepted"
