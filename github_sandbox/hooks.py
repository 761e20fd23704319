"""Webhook deliveries from the sandbox: signed, in order, with GitHub's delivery headers.

Like GitHub, a delivery is attempted once (within 10 s) and not retried; a test or the
control API can redeliver it with the same `X-GitHub-Delivery` GUID, as GitHub's
"Redeliver" button does.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from github_sandbox.operations import HookEvent

log = logging.getLogger(__name__)
DELIVERY_TIMEOUT_SECONDS = 10.0


@dataclass
class Delivery:
    id: str
    event: str
    payload: dict[str, Any]
    body: bytes
    status: int | None = None  # the receiver's answer; None while queued or undelivered
    error: str | None = None
    attempts: int = 0

    @property
    def action(self) -> str | None:
        action = self.payload.get("action")
        return action if isinstance(action, str) else None


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class HookSender:
    app_id: int
    url: str | None = None
    secret: str | None = None
    hook_id: int = 1
    sent: list[Delivery] = field(default_factory=list)
    _queue: asyncio.Queue[Delivery] | None = None
    _task: asyncio.Task[None] | None = None
    _session: aiohttp.ClientSession | None = None
    _idle: asyncio.Event | None = None

    def configure(self, url: str | None, secret: str | None) -> None:
        self.url = url
        self.secret = secret

    def enqueue(self, events: list[HookEvent]) -> list[Delivery]:
        deliveries = []
        for event in events:
            body = json.dumps(event.payload).encode()
            delivery = Delivery(str(uuid.uuid4()), event.event, event.payload, body)
            self.sent.append(delivery)
            deliveries.append(delivery)
            self._start()
            assert self._queue is not None and self._idle is not None
            self._idle.clear()
            self._queue.put_nowait(delivery)
        return deliveries

    def redeliver(self, delivery_id: str) -> Delivery:
        original = next(d for d in self.sent if d.id == delivery_id)
        self._start()
        assert self._queue is not None and self._idle is not None
        self._idle.clear()
        self._queue.put_nowait(original)
        return original

    def _start(self) -> None:
        if self._task is None:
            self._queue = asyncio.Queue()
            self._idle = asyncio.Event()
            self._idle.set()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sandbox-hooks")

    async def settle(self) -> None:
        """Wait until every queued delivery has been attempted (callers bound the wait)."""
        if self._idle is not None:
            await self._idle.wait()

    async def _run(self) -> None:
        assert self._queue is not None and self._idle is not None
        while True:
            delivery = await self._queue.get()
            try:
                await self._post(delivery)
            except Exception as exc:  # a receiver failure must not stop later deliveries
                delivery.error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "sandbox webhook %s (%s) failed: %s",
                    delivery.id,
                    delivery.event,
                    delivery.error,
                )
            finally:
                self._queue.task_done()
                if self._queue.empty():
                    self._idle.set()

    async def _post(self, delivery: Delivery) -> None:
        delivery.attempts += 1
        if not self.url:
            delivery.error = "no webhook URL configured"
            return
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=DELIVERY_TIMEOUT_SECONDS)
            )
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/sandbox",
            "X-GitHub-Event": delivery.event,
            "X-GitHub-Delivery": delivery.id,
            "X-GitHub-Hook-ID": str(self.hook_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
        }
        if self.secret:
            headers["X-Hub-Signature-256"] = sign(self.secret, delivery.body)
            headers["X-Hub-Signature"] = (
                "sha1=" + hmac.new(self.secret.encode(), delivery.body, hashlib.sha1).hexdigest()
            )
        async with self._session.post(self.url, data=delivery.body, headers=headers) as resp:
            delivery.status = resp.status
            delivery.error = None if resp.status < 300 else (await resp.text())[:500]

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None
