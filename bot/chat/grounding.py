"""The grounding seam of a chat turn: what retrieval gives the prompt, and the citation check.

`memory` provides the real grounder (retrieve rounds, floor, recency fallback, committed
memory); `NoGrounding` is used where no memory is wired (it retrieves nothing and says so).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.config import AgentConfig

Emit = Callable[[dict[str, Any]], Awaitable[None]]
NO_SEMANTIC_HITS = "(no semantic hits)"


@dataclass(frozen=True)
class Grounding:
    hits: list[dict[str, Any]] = field(default_factory=list)
    recency_fallback: bool = False
    committed_memory: list[dict[str, Any]] = field(default_factory=list)
    available: bool = True
    prompt_block: str = f"Prior Steelframe context:\n{NO_SEMANTIC_HITS}"
    committed_block: str = ""
    task: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def kept_hits(self) -> list[dict[str, Any]]:
        """Semantic hits injected as retrieved context (recency summaries are not)."""
        return [] if self.recency_fallback else self.hits


class Grounder(Protocol):
    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding: ...

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding: ...

    def cites(self, reply: str, grounding: Grounding) -> bool: ...


class NoGrounding:
    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding:
        return Grounding(meta={"retrieval": "not configured"})

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding:
        return previous

    def cites(self, reply: str, grounding: Grounding) -> bool:
        return True
