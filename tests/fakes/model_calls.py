"""Driving a runtime directly in tests: a request, its collected events, a stream held open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal

from bot.runtimes.base import (
    ChatMessage,
    Delta,
    Runtime,
    RuntimeError_,
    RuntimeEvent,
    RuntimeRequest,
    Thinking,
    TurnFacts,
)
from tests.fakes.ports import refused_port


def runtime_request(
    checkout: Path,
    message: str = "What does the README say?",
    *,
    history: Sequence[tuple[Literal["user", "assistant"], str]] = (),
    system: str = "You are Steelframe.",
) -> RuntimeRequest:
    messages = [ChatMessage(role=role, content=text) for role, text in history]
    messages.append(ChatMessage(role="user", content=message))
    return RuntimeRequest(
        system=system, messages=messages, facts=TurnFacts(message=message), checkout=checkout
    )


async def collect(runtime: Runtime, request: RuntimeRequest) -> list[RuntimeEvent]:
    return [event async for event in runtime.stream(request)]


async def collect_until_error(
    runtime: Runtime, request: RuntimeRequest
) -> tuple[list[RuntimeEvent], RuntimeError_]:
    """The events before the stream failed, and the failure (the test fails if none)."""
    events: list[RuntimeEvent] = []
    try:
        async for event in runtime.stream(request):
            events.append(event)
    except RuntimeError_ as exc:
        return events, exc
    raise AssertionError(f"the stream ended without an error: {events}")


def text_of(events: list[RuntimeEvent], kind: type[Thinking] | type[Delta]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


async def first_content_then_cancel(stream: AsyncIterator[RuntimeEvent]) -> list[RuntimeEvent]:
    """Read until the first delta, then cancel the reading task (as stop does to a turn)."""
    seen: list[RuntimeEvent] = []
    got_delta = asyncio.Event()

    async def read() -> None:
        async for event in stream:
            seen.append(event)
            if isinstance(event, Delta):
                got_delta.set()

    task = asyncio.create_task(read())
    async with asyncio.timeout(5):
        await got_delta.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return seen


def unused_port() -> int:
    """A loopback port nothing listens on, held so that nothing can (`refused_port`)."""
    return refused_port()
