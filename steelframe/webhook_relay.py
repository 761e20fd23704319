"""WEBHOOK_PROXY_URL: receive GitHub's webhooks through a smee.io-style relay while the
service runs on a laptop that GitHub cannot reach (as Probot does in development).

The relay holds an event stream open; each `message` event carries one delivery as JSON:
GitHub's headers (lower-case), the parsed `body`, a `timestamp` and sometimes a `query`.
Like smee-client, the relay posts the body, serialised as JavaScript's JSON.stringify does,
to the service's own webhook endpoint with those headers, so the signature check and the
durable delivery log work exactly as for a direct delivery. `ready` and `ping` events only
keep the stream alive. A dropped stream is reopened with a capped backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from bot.runtimes.eventstream import server_events

log = logging.getLogger("steelframe.relay")
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# Headers of the relay's own request or the event, never GitHub's: not forwarded.
NOT_FORWARDED = frozenset(
    {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
)


@dataclass(frozen=True)
class RelayedDelivery:
    headers: dict[str, str]
    body: bytes
    query: dict[str, str]


def delivery_from_event(data: str) -> RelayedDelivery | None:
    """One relayed delivery from a `message` event's data; None for anything else."""
    try:
        event = json.loads(data)
    except ValueError:
        return None
    if not isinstance(event, dict) or "body" not in event:
        return None
    body = json.dumps(event.pop("body"), separators=(",", ":"), ensure_ascii=False)
    query = event.pop("query", None) or {}
    event.pop("timestamp", None)
    headers = {
        str(name): str(value)
        for name, value in event.items()
        if str(name).lower() not in NOT_FORWARDED and isinstance(value, str | int)
    }
    headers["content-type"] = "application/json"
    return RelayedDelivery(headers, body.encode(), {str(k): str(v) for k, v in query.items()})


async def server_sent_events(
    response: aiohttp.ClientResponse,
) -> AsyncIterator[tuple[str, str]]:
    """(event type, data) per event of a text/event-stream response (the runtimes' parser)."""
    async for event in server_events(response.content):
        yield event.event, event.data


class WebhookRelay:
    """Forwards every delivery from `source` (the relay channel) to `target` (the service's
    `/api/github/webhooks`) until cancelled."""

    def __init__(self, source: str, target: str, session: aiohttp.ClientSession) -> None:
        self.source = source
        self.target = target
        self.session = session
        self.forwarded = 0

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                await self._stream()
                failures = 0  # the relay closed a healthy stream: reopen at once
            except (aiohttp.ClientError, TimeoutError) as exc:
                delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
                failures += 1
                log.warning("relay %s: %s; reconnecting in %.1f s", self.source, exc, delay)
                await asyncio.sleep(delay)

    async def _stream(self) -> None:
        headers = {"Accept": "text/event-stream"}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=90)
        async with self.session.get(self.source, headers=headers, timeout=timeout) as response:
            response.raise_for_status()
            log.info("relay: connected to %s, forwarding to %s", self.source, self.target)
            async for kind, data in server_sent_events(response):
                if kind != "message":
                    continue  # `ready` and `ping`
                delivery = delivery_from_event(data)
                if delivery is not None:
                    await self._forward(delivery)

    async def _forward(self, delivery: RelayedDelivery) -> None:
        guid = delivery.headers.get("x-github-delivery", "?")
        try:
            async with self.session.post(
                self.target, data=delivery.body, headers=delivery.headers, params=delivery.query
            ) as answer:
                self.forwarded += 1
                log.info("relay: delivery %s -> %s", guid, answer.status)
        except aiohttp.ClientError as exc:  # the service is down: GitHub's redeliver button
            log.warning("relay: delivery %s not forwarded: %s", guid, exc)


@contextlib.asynccontextmanager
async def running_relay(source: str, target: str) -> AsyncIterator[WebhookRelay]:
    """A relay forwarding in the background for as long as the block runs."""
    async with aiohttp.ClientSession() as session:
        relay = WebhookRelay(source, target, session)
        task = asyncio.create_task(relay.run(), name="webhook-relay")
        try:
            yield relay
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def local_target(host: str, port: int) -> str:
    """The service's own webhook endpoint, as the relay reaches it on this machine."""
    reachable = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{reachable}:{port}/api/github/webhooks"


def relay_context(settings: Any, host: str, port: int) -> Any:
    """What `serve` adds to the app when WEBHOOK_PROXY_URL is set (aiohttp cleanup_ctx)."""

    async def relay(app: Any) -> AsyncIterator[None]:
        async with running_relay(settings.webhook_proxy_url, local_target(host, port)):
            yield

    return relay
