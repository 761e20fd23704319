"""What an operator asks of Chat in one send (`TurnRequest`): the message, where it goes, and
the client's idempotency key; the turn pipeline (bot.chat.pipeline) starts a turn for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.chat.session_rows import UNSET
from bot.chat.turn_keys import Asked, row_key


@dataclass(frozen=True)
class TurnRequest:
    operator_id: int
    message: str
    session_id: str | None = None
    agent: str | None = None
    focus: Any = UNSET  # an issue, None (clear focus) or UNSET (keep)
    # The client's idempotency key: one turn per key (bot.chat.turn_keys); None: no key.
    key: str | None = None

    def row_key(self) -> str | None:
        """The key's row key (bot.chat.turn_keys.row_key); None without a key."""
        return None if self.key is None else row_key(self.operator_id, self.key)

    def asked(self) -> Asked:
        keep = self.focus is UNSET
        return Asked(
            message=self.message,
            session=self.session_id,
            agent=self.agent,
            focus=None if keep else self.focus,
            keep_focus=keep,
        )
