"""Routing deliveries to handlers by event and action (gidgethub's `Router`), with what
each handler needs from the payload declared beside it, so a delivery lacking it is
answered 400 before it is acknowledged instead of failing later.

A handler is `async def on_x(event: gidgethub.sansio.Event, ctx: WebhookContext) -> None`,
registered with `@handles(router, "issues", action="opened", needs={"issue.number": int})`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from bot.checkouts import ManagedCheckouts
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.github.client import GitHubClient
from bot.lifecycle.pickup import Pickups
from bot.lifecycle.queue import LifecycleQueue
from bot.lifecycle.redact import Redactor
from bot.lifecycle.resume import Resumes
from bot.lifecycle.terminate import Terminations
from webhooks.chunks import ChunkSink


class RecentWrites:
    """What this process wrote lately (key -> fingerprint), so a burst of deliveries about
    one repository does not rewrite the same row each time. Entries live `ttl` seconds;
    another process's change is picked up at the latest then."""

    def __init__(self, *, ttl: float = 300.0, limit: int = 10_000) -> None:
        self._ttl = ttl
        self._limit = limit
        self._entries: dict[str, tuple[object, float]] = {}

    def unchanged(self, key: str, fingerprint: object) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry[0] == fingerprint and time.monotonic() < entry[1]

    def wrote(self, key: str, fingerprint: object) -> None:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = (fingerprint, time.monotonic() + self._ttl)

    def clear(self) -> None:
        self._entries.clear()


@dataclass(frozen=True)
class WebhookContext:
    """What a handler may use; built once per process, shared by every delivery."""

    db: Database
    settings: Settings
    clock: Clock
    github: GitHubClient | None = None
    chunks: ChunkSink | None = None
    # The task lifecycle (pickup labels, Decision comments, the queue review and CI runs
    # go on); each None without Redis.
    pickups: Pickups | None = None
    resumes: Resumes | None = None
    terminations: Terminations | None = None
    queue: LifecycleQueue | None = None
    # Chat's managed clones, told when a repository changed; None without a GitHub App.
    checkouts: ManagedCheckouts | None = None
    recent: RecentWrites = field(default_factory=RecentWrites)
    # The secret values CI notes must not show, from the settings (and environment) the
    # process started with: built once, not from the environment on every CI event.
    redactor: Redactor = field(default_factory=Redactor)


Handler = Callable[[Event, WebhookContext], Awaitable[None]]


def handles(
    router: Router,
    event: str,
    *,
    action: str | None = None,
    needs: Mapping[str, type] | None = None,
) -> Callable[[Handler], Handler]:
    """Register a handler for `event` (and `action`), with the dotted payload paths it
    needs and their types, e.g. {"issue.number": int, "repository.full_name": str}."""

    def decorator(func: Handler) -> Handler:
        func.webhook_needs = dict(needs or {})  # type: ignore[attr-defined]
        if action is None:
            router.add(func, event)
        else:
            router.add(func, event, action=action)
        return func

    return decorator


def lookup(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def missing_needs(router: Router, event: Event) -> list[str]:
    """What the handlers routed for `event` need and the payload lacks (or has mistyped)."""
    return problems(_needs(router, event), lambda path: lookup(event.data, path))


def problems(needs: Iterable[tuple[str, type]], get: Callable[[str], Any]) -> list[str]:
    """Each need whose value (`get(path)`) is absent or of another type, as `path (type)`."""
    found = []
    for path, kind in needs:
        value = get(path)
        wrong_type = not isinstance(value, kind) or (kind is int and isinstance(value, bool))
        if value is None or wrong_type:
            found.append(f"{path} ({kind.__name__})")
    return sorted(set(found))


def needs_for(router: Router, event: str, action: str | None) -> tuple[tuple[str, type], ...]:
    """The needs of the handlers routed for `event` with `action` (text or None)."""
    return _needs_by_route(router, event, action)


def _needs(router: Router, event: Event) -> tuple[tuple[str, type], ...]:
    """The needs of the handlers routed for `event`. Handlers are routed by event and
    action only (`handles`), so that pair is the key of a cache: routing every delivery
    through the composed router again was ~3% of a delivery's time on the event loop."""
    action = event.data.get("action") if isinstance(event.data, dict) else None
    if action is not None and not isinstance(action, str):
        return _needs_of(router.fetch(event))
    return _needs_by_route(router, event.event, action)


@functools.lru_cache(maxsize=1024)
def _needs_by_route(router: Router, event: str, action: str | None) -> tuple[tuple[str, type], ...]:
    data = {} if action is None else {"action": action}
    return _needs_of(router.fetch(Event(data, event=event, delivery_id="-")))


def _needs_of(handlers: Any) -> tuple[tuple[str, type], ...]:
    return tuple(
        (path, kind)
        for handler in handlers
        for path, kind in getattr(handler, "webhook_needs", {}).items()
    )


def compose(*routers: Router) -> Router:
    """One router from the per-concern routers (bedevere's pattern)."""
    return Router(*routers)
