"""Ordered fallback across routes (model + endpoint), taken only before any content.

The selected route answers unless it is unavailable before producing anything (refused
connection, timeout, 408/429/5xx, an overloaded or rate-limit error event); then the next
route is tried, with a `status` frame saying so. Once a route has produced text, reasoning
or a tool call it is pinned: a later failure is the turn's error, never a silent switch.
Wrong requests (other 4xx) stay on the selected route, since another model would only hide
the problem. Each route emits its own `Route` event, so the turn records who answered.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

from bot.runtimes.base import (
    Delta,
    Runtime,
    RuntimeError_,
    RuntimeEvent,
    RuntimeRequest,
    Status,
    Thinking,
    closing_stream,
)
from bot.runtimes.transport import UpstreamFailure

log = logging.getLogger(__name__)


class FallbackRuntime:
    def __init__(self, routes: Sequence[Runtime]) -> None:
        if not routes:
            raise ValueError("a fallback runtime needs at least one route")
        self.routes = list(routes)
        self.name = self.routes[0].name
        self.model = self.routes[0].model  # the requested model

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        for position, route in enumerate(self.routes):
            produced = False
            try:
                async with closing_stream(route.stream(request)) as events:
                    async for event in events:
                        if isinstance(event, Thinking | Delta):
                            produced = True
                        yield event
                return
            except RuntimeError_ as exc:
                following = self.routes[position + 1] if position + 1 < len(self.routes) else None
                if following is None or produced or not _may_fall_back(exc):
                    raise
                log.warning(
                    "route %s/%s failed before content (%s); falling back to %s",
                    route.name,
                    route.model,
                    exc.message,
                    following.model,
                )
                yield Status(f"{route.model} unavailable · trying {following.model}: {exc.message}")


def _may_fall_back(exc: RuntimeError_) -> bool:
    return isinstance(exc, UpstreamFailure) and exc.retryable and exc.before_content
