"""The runtime interface: an async stream of thinking/delta/usage events, cancellable.

A runtime is cancelled by cancelling the task that iterates it; implementations must close
their upstream request when that happens (an `async with` around the request does it).
Callers read a stream inside `closing_stream`, so a stream left between two events (the
reader cancelled while it handled one) is closed then too, not when it is collected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from bot.contracts.hits import RetrievedHit
from bot.contracts.tasks import FocusedTask
from bot.contracts.turn_meta import ContextMeta
from memory.committed import CommittedFile


@dataclass(frozen=True)
class Thinking:
    text: str


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Route:
    """Which model and endpoint actually answered (differs from the request on fallback)."""

    model: str
    endpoint: str


@dataclass(frozen=True)
class Status:
    """A live phase the runtime wants shown (e.g. history trimmed, tool round)."""

    text: str


@dataclass(frozen=True)
class ContextBudget:
    """How the history was fitted to the answering model's context window (estimated tokens).

    A runtime emits one per stream before calling its model; on fallback the last one
    describes the route that answered, so its sizes are the ones the turn records.
    """

    window: int
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int

    @property
    def trimmed(self) -> bool:
        return self.after_messages < self.before_messages

    def as_meta(self) -> ContextMeta:
        return {
            "window": self.window,
            "before_tokens": self.before_tokens,
            "after_tokens": self.after_tokens,
            "before_messages": self.before_messages,
            "after_messages": self.after_messages,
            "trimmed": self.trimmed,
        }


RuntimeEvent = Thinking | Delta | Usage | Route | Status | ContextBudget


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class TurnFacts:
    """What the turn was given, as structured data (the offline runtime answers from it).

    The records are the ones Chat read (the committed files, the focused issue's task), not
    their JSON: the system prompt is where the task becomes JSON (bot/chat/prompt.py).
    """

    message: str
    focus: int | None = None
    hits: list[RetrievedHit] = field(default_factory=list)
    recency_fallback: bool = False
    committed_memory: list[CommittedFile] = field(default_factory=list)
    task: FocusedTask | None = None
    retrieval_available: bool = True
    redraft_hint: str | None = None
    # The answerability verdict (bot.chat.grounding.Verdict): False when session memory
    # has nothing that answers the question (the hits are the closest, not an answer).
    memory_answers: bool = True
    # The message is a command Steelframe answers from its records after the draft ("what
    # is #N waiting for?", "publish it"): the draft says nothing of session memory.
    answered_by_record: bool = False


@dataclass(frozen=True)
class RuntimeRequest:
    system: str
    messages: list[ChatMessage]
    facts: TurnFacts
    checkout: Path = Path(".")
    max_output_tokens: int = 2048


class RuntimeError_(Exception):
    """The runtime failed; `message` is safe to show the operator (no keys, no traces)."""

    def __init__(self, message: str, *, before_content: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.before_content = before_content


class Runtime(Protocol):
    name: str
    model: str

    def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]: ...


@asynccontextmanager
async def closing_stream(
    events: AsyncIterator[RuntimeEvent],
) -> AsyncIterator[AsyncIterator[RuntimeEvent]]:
    """Close a runtime's stream when we stop reading it, so its upstream request ends now."""
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
