"""What every agent preset shares: the run it is asked to do, and the coding-command
protocol lines (docs/lifecycle.md) its parser turns the agent's output into.

Parsers are pure: they get the agent's stdout line by line and the exit status, and return
protocol events as dicts. No I/O, so tests drive them with the documented transcripts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Event = dict[str, Any]
# The agent ends its final message with this line to ask a person instead of guessing.
QUESTION_MARKER = "STEELFRAME-QUESTION:"
ASK_INSTRUCTION = (
    "If you cannot finish without an answer from a person (the issue is unclear, or there "
    "is a choice only its authors can make), do not guess: stop, and make the last line of "
    f"your final message start with {QUESTION_MARKER} followed by one clear question."
)
_QUESTION = re.compile(rf"^\s*\**{re.escape(QUESTION_MARKER)}\**\s*(?P<q>.+)$", re.MULTILINE)
MAX_QUESTION = 2000
# Progress names are the agent's tool names: kept short and plain for a public comment.
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,39}")


@dataclass(frozen=True)
class AgentRun:
    """One run of an agent, as the adapter learns it from the protocol's environment."""

    prompt: str
    cwd: Path
    model: str | None = None
    max_turns: int = 50
    budget_usd: float | None = None
    resume: str | None = None
    decision: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    # Text for the agent's stdin; None gives it /dev/null (Codex reads a piped stdin).
    stdin: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


class Parser(Protocol):
    def feed(self, line: str) -> list[Event]: ...

    def result(self, exit_code: int, *, changed: bool) -> Event: ...


def find_question(text: str) -> str | None:
    """The question after the marker on the last marked line of `text`, if any."""
    found = _QUESTION.findall(text or "")
    if not found:
        return None
    question = str(found[-1]).strip()
    return question[:MAX_QUESTION] or None


def progress(action: str, name: str) -> Event:
    """A protocol `progress` line: an action (command, edit, tool) and the tool's name."""
    plain = _NAME.match(name or "")
    return {"type": "progress", "action": action, "name": plain.group(0) if plain else "tool"}


def json_object(line: str) -> dict[str, Any] | list[Event]:
    """A JSON-lines agent's output line as the object it carries, or else the events the
    line makes: plain text passes on as a log line; JSON that is not an object is dropped."""
    try:
        message = json.loads(line)
    except ValueError:
        return [log(line)] if line.strip() else []
    return message if isinstance(message, dict) else []


def log(text: str) -> Event:
    return {"type": "log", "text": text[:500]}


def done(summary: str) -> Event:
    return {"type": "result", "status": "done", "summary": summary[:2000]}


def failed(error: str) -> Event:
    return {"type": "result", "status": "error", "error": error[:1000]}


def asked(question: str) -> Event:
    return {"type": "result", "status": "question", "question": question}


def usage(input_tokens: int, output_tokens: int, cost_usd: float) -> Event:
    return {
        "type": "usage",
        "input_tokens": int(input_tokens),
        "output_tokens": int(output_tokens),
        "cost_usd": float(cost_usd),
    }


def as_int(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


def as_float(value: Any) -> float:
    try:
        number = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return number if number >= 0 and number != float("inf") else 0.0
