"""The one webhook router, composed from the per-concern routers."""

from __future__ import annotations

from gidgethub.routing import Router

from webhooks import lifecycle_hooks
from webhooks.handlers import (
    base_moves,
    ci,
    comments,
    installations,
    issues,
    ping,
    pulls,
    repository_changes,
)
from webhooks.routing import compose

ROUTERS: list[Router] = [
    ping.router,
    installations.router,
    issues.router,
    comments.router,
    pulls.router,
    repository_changes.router,
    lifecycle_hooks.router,
    ci.router,
    base_moves.router,
]


def build_router(*extra: Router) -> Router:
    return compose(*ROUTERS, *extra)
