"""The tool-round loop every model runtime shares: ask the model, stream what it says, and
while it asks for tools (and the turn has rounds left) run them and ask again.

What differs per provider is behind `Conversation`: how one round is requested and read,
and how the model's tool calls and their results join the messages. The rules live here
once: the last round offers no tools; a model that still calls tools after it has answered
gets a status line and the answer stands; one that never answered is an upstream failure;
and a failure after content was streamed is reported as such (no fallback route then).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol

from bot.runtimes.base import Delta, RuntimeEvent, Status, Usage
from bot.runtimes.tools import RepoTools, ToolCall, ToolResult, status_text
from bot.runtimes.transport import UpstreamFailure


@dataclass(frozen=True)
class RoundOutcome:
    """What one finished round left: its reply text, the tools it asked for (none: it
    answered), and the tokens it used if the provider said."""

    text: str
    calls: list[ToolCall]
    usage: Usage | None


class Conversation(Protocol):
    def round(self, *, final: bool) -> AsyncGenerator[RuntimeEvent, None]:
        """Stream one round; `final`: offer no tools (or forbid their use)."""
        ...

    def outcome(self, round_number: int) -> RoundOutcome:
        """The round just streamed (`round_number` counts from 1)."""
        ...

    def record(self, outcome: RoundOutcome, results: list[ToolResult]) -> None:
        """Add the model's tool calls and their results to the messages."""
        ...


async def tool_rounds(
    conversation: Conversation, *, tools: RepoTools | None, rounds: int, where: str
) -> AsyncGenerator[RuntimeEvent, None]:
    produced = False  # text, reasoning or a tool call: the route is pinned from then on
    answered = False  # reply text (not only reasoning) has been streamed
    for number in range(1, rounds + 2):
        final = tools is None or number > rounds
        try:
            async with aclosing(conversation.round(final=final)) as events:
                async for event in events:
                    produced = True
                    answered = answered or isinstance(event, Delta)
                    yield event
        except UpstreamFailure as exc:
            raise (exc.after_content() if produced else exc) from None
        outcome = conversation.outcome(number)
        if outcome.usage is not None:
            yield outcome.usage
        if not outcome.calls:
            return
        if tools is None or final:
            if answered:
                yield Status("the model asked for more tools than this turn allows")
                return
            limit = f"the limit of {rounds} rounds" if tools else "no tools"
            raise UpstreamFailure(
                f"{where} kept calling tools ({limit}) without answering", before_content=False
            )
        produced = True
        yield Status(status_text(number, rounds, outcome.calls))
        results = await tools.run(outcome.calls, last_round=number == rounds)
        conversation.record(outcome, results)
        if outcome.text and not outcome.text.endswith("\n"):
            yield Delta("\n\n")  # keep text from before and after the tools apart
