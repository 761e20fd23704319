"""Context budget: fit the conversation into the answering model's context window.

No tokenizer is shared by every model, so sizes are estimates (characters / 3.5, a little
generous for English so the estimate errs towards trimming). The system prompt and the
operator's message are never cut; the oldest history goes first, and the kept history
always starts with a user turn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bot.runtimes.base import ChatMessage, ContextBudget, RuntimeEvent, RuntimeRequest, Status
from bot.runtimes.transport import UpstreamFailure

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_TOKENS = 4  # role markers and separators in every chat template
TOOL_SCHEMA_TOKENS = 600  # the three read-only tool definitions, generously
SAFETY_FRACTION = 0.05  # of the window, for estimate error


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(message: ChatMessage) -> int:
    return estimate_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS


def reserve_tokens(
    window: int, *, max_output_tokens: int, thinking_tokens: int, tools: bool
) -> int:
    """Tokens of the window kept free for the answer, its reasoning and the tool schemas."""
    reserve = max_output_tokens + thinking_tokens + math.ceil(window * SAFETY_FRACTION)
    return reserve + (TOOL_SCHEMA_TOKENS if tools else 0)


@dataclass(frozen=True)
class Fitted:
    messages: list[ChatMessage]
    budget: ContextBudget
    room: int  # estimated tokens still free for tool output this turn

    def events(self) -> list[RuntimeEvent]:
        """The budget for the metadata, and a `status` frame when history was trimmed."""
        events: list[RuntimeEvent] = [self.budget]
        if self.budget.trimmed:
            events.append(Status(trim_text(self.budget)))
        return events


def fit_history(
    system: str, messages: Sequence[ChatMessage], *, window: int, reserve: int, model: str
) -> Fitted:
    """The newest history that fits `window - reserve`; the last message is the operator's.

    Raises a (retryable) `UpstreamFailure` when even the system prompt and the operator's
    message alone do not fit: a route with a larger window may still answer.
    """
    limit = window - reserve
    *history, latest = messages
    fixed = estimate_tokens(system) + MESSAGE_OVERHEAD_TOKENS + message_tokens(latest)
    sizes = [message_tokens(message) for message in history]
    before = fixed + sum(sizes)
    if fixed > limit:
        raise UpstreamFailure(
            f"the message and its context (~{fixed:,} tokens) do not fit {model}'s context "
            f"window of {window:,} tokens (with {reserve:,} kept for the answer)",
            retryable=True,
        )
    start = 0
    total = before
    while start < len(history) and (total > limit or history[start].role != "user"):
        total -= sizes[start]
        start += 1
    kept = [*history[start:], latest]
    budget = ContextBudget(
        window=window,
        before_tokens=before,
        after_tokens=total,
        before_messages=len(messages),
        after_messages=len(kept),
    )
    return Fitted(messages=kept, budget=budget, room=max(0, limit - total))


def trim_text(budget: ContextBudget) -> str:
    return (
        f"history trimmed: {budget.before_messages} → {budget.after_messages} messages "
        f"(~{budget.before_tokens:,} → ~{budget.after_tokens:,} tokens) "
        f"to fit a {budget.window:,}-token window"
    )


def fit_request(
    request: RuntimeRequest, *, model: str, window: int, thinking_tokens: int = 0, tools: bool
) -> Fitted:
    """The request's history fitted to `window`, with room kept for the reply, thinking and
    tool definitions: the same first step of every model runtime."""
    reserve = reserve_tokens(
        window,
        max_output_tokens=request.max_output_tokens,
        thinking_tokens=thinking_tokens,
        tools=tools,
    )
    return fit_history(
        request.system, request.messages, window=window, reserve=reserve, model=model
    )
