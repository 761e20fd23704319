"""Model runtimes: one interface (`Runtime`), one module per protocol."""

from bot.runtimes.base import (
    ChatMessage,
    Delta,
    Route,
    Runtime,
    RuntimeError_,
    RuntimeEvent,
    RuntimeRequest,
    Thinking,
    Usage,
)

__all__ = [
    "ChatMessage",
    "Delta",
    "Route",
    "Runtime",
    "RuntimeError_",
    "RuntimeEvent",
    "RuntimeRequest",
    "Thinking",
    "Usage",
]
