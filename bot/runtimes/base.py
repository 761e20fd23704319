"""The runtime interface: an async stream of thinking/delta/usage events, cancellable.

A runtime is cancelled by cancelling the task that iterates it; implementations must close
their upstream request when that happens (an `async with` around the request does it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol


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


RuntimeEvent = Thinking | Delta | Usage | Route | Status


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class TurnFacts:
    """What the turn was given, as structured data (the offline runtime answers from it)."""

    message: str
    focus: int | None = None
    hits: list[dict[str, Any]] = field(default_factory=list)
    recency_fallback: bool = False
    committed_memory: list[dict[str, Any]] = field(default_factory=list)
    task: dict[str, Any] | None = None
    retrieval_available: bool = True
    redraft_hint: str | None = None


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
