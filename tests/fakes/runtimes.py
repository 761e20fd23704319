"""Scripted runtimes: stand-ins for a model that emit a fixed script of events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from bot.runtimes.base import Delta, Route, RuntimeEvent, RuntimeRequest, Thinking, Usage


@dataclass
class ScriptedRuntime:
    """Plays `drafts[n]` for the n-th call (the last one repeats), one event per `delay`.

    `gate`, when set, is awaited before the first event so a test can hold a turn open;
    `called` is set once a turn has reached the model (the server holds a running turn);
    `cancelled` is set if the turn is cancelled mid-stream (stop must end the model call),
    at an event's wait or, closed by its reader, between two events.
    """

    drafts: Sequence[Sequence[RuntimeEvent]]
    delay: float = 0.0
    gate: asyncio.Event | None = None
    name: str = "scripted"
    model: str = "scripted-model"
    requests: list[RuntimeRequest] = field(default_factory=list)
    called: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        index = min(len(self.requests), len(self.drafts) - 1)
        self.requests.append(request)
        self.called.set()
        try:
            if self.gate is not None:
                await self.gate.wait()
            yield Route(model=self.model, endpoint="scripted")
            for event in self.drafts[index]:
                if self.delay:
                    await asyncio.sleep(self.delay)
                yield event
        except (asyncio.CancelledError, GeneratorExit):  # the reader stopped mid-stream
            self.cancelled.set()
            raise


def reply(
    text: str, *, thinking: str = "", trailer: str | None = None, pieces: int = 4
) -> list[RuntimeEvent]:
    """Events for one draft: optional thinking, the text in `pieces` deltas, a trailer."""
    events: list[RuntimeEvent] = []
    if thinking:
        events.append(Thinking(thinking))
    body = text if trailer is None else f"{text}\n{trailer}"
    size = max(1, len(body) // pieces)
    events.extend(Delta(body[i : i + size]) for i in range(0, len(body), size))
    events.append(Usage(input_tokens=10, output_tokens=len(text.split())))
    return events
