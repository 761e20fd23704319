"""The agent's progress in words for the sticky progress comment: counts of what it did,
never its raw commands or output (those stay in the private run log)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# The comment is edited at most this often while an agent works (GitHub asks for at least
# a second between writes; an agent can take dozens of steps a minute).
PROGRESS_INTERVAL_SECONDS = 15.0
MAX_NAMES = 5


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


@dataclass
class Tally:
    actions: Counter[str] = field(default_factory=Counter)
    tools: Counter[str] = field(default_factory=Counter)
    last_posted: float | None = None

    def add(self, action: str, name: str) -> None:
        self.actions[action] += 1
        if action == "tool" and name:
            self.tools[name] += 1

    def due(self, now: float, interval: float = PROGRESS_INTERVAL_SECONDS) -> bool:
        """True (and remembered) when the comment may be edited again."""
        if self.last_posted is not None and now - self.last_posted < interval:
            return False
        self.last_posted = now
        return True

    def words(self, agent: str) -> str:
        parts = []
        if self.actions["command"]:
            parts.append(_plural(self.actions["command"], "command run", "commands run"))
        if self.actions["edit"]:
            parts.append(_plural(self.actions["edit"], "file edit", "file edits"))
        if self.actions["tool"]:
            names = ", ".join(name for name, _ in self.tools.most_common(MAX_NAMES))
            parts.append(
                _plural(self.actions["tool"], "other tool call", "other tool calls")
                + (f" ({names})" if names else "")
            )
        return f"{agent} is working: " + ("; ".join(parts) if parts else "starting") + "."
