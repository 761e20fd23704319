"""What every agent preset shares: the run it is asked to do, and the coding-command
protocol lines (docs/lifecycle.md; bot/contracts/coding_protocol.py) its parser turns the
agent's output into.

Parsers are pure: they get the agent's stdout line by line and the exit status, and return
protocol events (`AgentEvent` Structs). No I/O, so tests drive them with the documented
transcripts. The JSON-lines agents' lines decode with the Structs of their format
(bot/contracts/claude_code.py, codex_exec.py) through `read_line`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from bot.contracts.coding_protocol import (
    AgentEvent,
    AgentLimit,
    Log,
    Progress,
    ProgressAction,
    Result,
    Usage,
)
from bot.contracts.tagged_json import TaggedDecoder

T = TypeVar("T")
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
    def feed(self, line: str) -> list[AgentEvent]: ...

    def result(self, exit_code: int, *, changed: bool) -> Result: ...


def find_question(text: str) -> str | None:
    """The question after the marker on the last marked line of `text`, if any."""
    found = _QUESTION.findall(text or "")
    if not found:
        return None
    question = str(found[-1]).strip()
    return question[:MAX_QUESTION] or None


def progress(action: ProgressAction, name: str) -> Progress:
    """A protocol `progress` line: an action (command, edit, tool) and the tool's name."""
    plain = _NAME.match(name or "")
    return Progress(action=action, name=plain.group(0) if plain else "tool")


class MalformedLine(ValueError):
    """A line of a type the format defines, in a shape it does not (a key missing, a value
    of another type): the agent's output changed under the pinned version, or is broken."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"a malformed `{kind}` line ({detail})")
        self.kind = kind


class _Kind(msgspec.Struct):
    type: str


_KIND = msgspec.json.Decoder(_Kind)


def read_line(decoder: TaggedDecoder[T], line: str) -> T | list[AgentEvent]:
    """A JSON-lines agent's output line as the Struct of its type, or else the events the
    line makes by itself. Lenient where the formats are: a line that is not JSON is the
    agent's (or its runtime's) own text and passes on as a log line, as it always did;
    JSON that is not an object with a `type`, and a type this version does not know (the
    formats add types between releases), make nothing. A known type in the wrong shape
    raises `MalformedLine`, naming the key (never the value: the text is the agent's)."""
    if not line.strip():
        return []
    try:
        decoded = decoder.decode(line)
    except msgspec.ValidationError as exc:
        try:
            kind = _KIND.decode(line).type
        except msgspec.ValidationError:
            return []  # not an object, or one without a string `type`: as before, nothing
        raise MalformedLine(kind[:40], str(exc)[:300]) from None
    except msgspec.DecodeError:
        return [log(line)]
    return [] if decoded is None else decoded


def log(text: str) -> Log:
    return Log(text=text[:500])


def done(summary: str) -> Result:
    return Result(status="done", summary=summary[:2000])


def failed(error: str, *, limit: AgentLimit | None = None) -> Result:
    if limit is None:
        return Result(status="error", error=error[:1000])
    return Result(status="error", error=error[:1000], limit=limit)


def asked(question: str) -> Result:
    return Result(status="question", question=question)


def usage(input_tokens: int, output_tokens: int, cost_usd: float) -> Usage:
    return Usage(
        input_tokens=int(input_tokens), output_tokens=int(output_tokens), cost_usd=float(cost_usd)
    )


def as_int(value: int | None) -> int:
    """A count the agent reported; absent, null or negative is 0."""
    return max(value or 0, 0)


def as_float(value: float | None) -> float:
    """An amount the agent reported; absent, null, negative or not finite is 0."""
    number = float(value or 0.0)
    return number if 0 <= number < float("inf") else 0.0
