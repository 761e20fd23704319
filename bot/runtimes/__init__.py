"""Model runtimes: one interface (`Runtime`), one module per protocol."""

from bot.runtimes.base import (
    ChatMessage,
    ContextBudget,
    Delta,
    Route,
    Runtime,
    RuntimeError_,
    RuntimeEvent,
    RuntimeRequest,
    Status,
    Thinking,
    Usage,
)

__all__ = [
    "ChatMessage",
    "ContextBudget",
    "Delta",
    "Route",
    "Runtime",
    "RuntimeError_",
    "RuntimeEvent",
    "RuntimeRequest",
    "Status",
    "Thinking",
    "Usage",
]
