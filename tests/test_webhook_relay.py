"""WEBHOOK_PROXY_URL: deliveries that come through a smee.io-style relay (its event-stream
format) reach the service's webhook endpoint, signature intact, and a dropped stream is
reopened."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy import select

from steelframe.webhook_relay import delivery_from_event, running_relay
from tests.conftest import GITHUB_DATA, ApiClient, webhook_headers
from tests.fakes.lifecycle import PATIENCE_SECONDS, wait_for
from webhooks.deliveries import WebhookDelivery

OPENED = json.loads((GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text())


def relayed(payload: dict[str, Any], delivery: str) -> dict[str, Any]:
    """What a smee.io channel sends for one GitHub delivery: GitHub's headers lower-cased,
    the parsed body and a timestamp (GitHub signed the compact JSON it sent)."""
    sent = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {k.lower(): v for k, v in webhook_headers(sent, "issues", delivery=delivery).items()}
    return {**headers, "host": "smee.io", "body": payload, "timestamp": 1767225600000}


class FakeRelay:
    """A relay channel: `ready`, then each queued event; `None` drops the stream."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.connections = 0

    async def channel(self, request: web.Request) -> web.StreamResponse:
        self.connections += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"event: ready\ndata: {}\n\n")
        await response.write(b"event: ping\ndata: {}\n\n: comment\n\n")
        while (event := await self.events.get()) is not None:
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
        return response


@pytest.fixture
async def relay(aiohttp_server: Any) -> tuple[FakeRelay, str]:
    fake = FakeRelay()
    app = web.Application()
    app.router.add_get("/channel-1", fake.channel)
    server = await aiohttp_server(app)
    return fake, str(server.make_url("/channel-1"))


def _statuses(service: ApiClient) -> dict[str, str]:
    return service.services.db.call(
        lambda s: {d.delivery_id: d.status for d in s.scalars(select(WebhookDelivery))}
    )


async def test_deliveries_through_the_relay_are_verified_stored_and_survive_a_dropped_stream(
    github_service: ApiClient, relay: tuple[FakeRelay, str]
) -> None:
    fake, source = relay
    target = str(github_service.raw.make_url("/api/github/webhooks"))
    async with running_relay(source, target) as running:
        fake.events.put_nowait(relayed(OPENED, "relayed-1"))
        await wait_for(lambda: "relayed-1" in _statuses(github_service), within=PATIENCE_SECONDS)
        fake.events.put_nowait(None)  # the relay drops the stream; the client reopens it
        await wait_for(lambda: fake.connections == 2, within=PATIENCE_SECONDS)
        fake.events.put_nowait(relayed(OPENED, "relayed-2"))
        await wait_for(lambda: "relayed-2" in _statuses(github_service), within=PATIENCE_SECONDS)
        # The service stores a delivery before the relay client reads its answer.
        await wait_for(lambda: running.forwarded == 2, within=PATIENCE_SECONDS)
    statuses = _statuses(github_service)
    assert statuses["relayed-1"] != "rejected" and statuses["relayed-2"] != "rejected"
    assert running.forwarded == 2


def test_an_event_becomes_the_request_github_made() -> None:
    event = relayed({"action": "opened", "title": "café"}, "d-1") | {"query": {"x": "1"}}
    delivery = delivery_from_event(json.dumps(event))
    assert delivery is not None
    assert delivery.body == '{"action":"opened","title":"café"}'.encode()
    assert delivery.headers["x-github-delivery"] == "d-1"
    assert "host" not in delivery.headers and "timestamp" not in delivery.headers
    assert delivery.query == {"x": "1"}
    assert delivery_from_event("{}") is None and delivery_from_event("not json") is None


def test_serve_refuses_a_relay_without_a_fixed_port(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "WEBHOOK_PROXY_URL": "http://127.0.0.1:9/channel"}
    env["STEELFRAME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'relay.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "serve", "--port", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PATIENCE_SECONDS,
    )
    assert result.returncode == 2 and "WEBHOOK_PROXY_URL needs a fixed port" in result.stderr
