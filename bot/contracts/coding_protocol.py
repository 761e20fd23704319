"""The coding-command protocol's lines (docs/lifecycle.md, "The coding command") as msgspec
Structs: what a coding agent's parser makes of the agent's output
(bot/lifecycle/agents/), printed by the adapter as one JSON line each for the worker
(bot/lifecycle/coding.py reads them back).

`line()` renders an event exactly as the protocol's lines were printed before they were
typed (`json.dumps` of the object: `", "` / `": "` separators, ASCII escapes, `type` first,
then the fields in declaration order, the unset ones left out). The worker keeps those lines
verbatim in the task's run log, so the rendering is part of the contract.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

ProgressAction = Literal["command", "edit", "tool"]
ResultStatus = Literal["done", "question", "error"]
# An agent's own limit a failed result names (the worker ends the run as a limit, no retry).
AgentLimit = Literal["turns", "cost", "tokens", "time"]


class _Line(msgspec.Struct, frozen=True, tag_field="type"):
    pass


class Session(_Line, frozen=True, tag="session"):
    """The agent's session, as soon as it has one: a continuation resumes it."""

    session_id: str
    transcript: str | UnsetType = UNSET


class Usage(_Line, frozen=True, tag="usage"):
    """The run's running totals so far. A total the command does not keep (a local model's
    cost) it leaves out: 0, and no limit on it applies (the presets send all three)."""

    input_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    output_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] = 0.0


class Log(_Line, frozen=True, tag="log"):
    text: str  # for the private run log: anything the agent said is untrusted text


class Progress(_Line, frozen=True, tag="progress"):
    """One step the agent took, for the progress comment (counted, never shown raw)."""

    action: ProgressAction
    name: str  # the agent's tool name, plain and short


class Result(_Line, frozen=True, tag="result"):
    """The run's outcome, last. `summary` with done, `question` with question, `error` (and
    maybe `limit`) with error; the others are not sent."""

    status: ResultStatus
    summary: str | UnsetType = UNSET
    question: str | UnsetType = UNSET
    error: str | UnsetType = UNSET
    limit: AgentLimit | UnsetType = UNSET


AgentEvent = Session | Usage | Log | Progress | Result


def line(event: AgentEvent) -> str:
    """The event as the protocol line printed for it (see the module's docstring)."""
    return json.dumps(msgspec.to_builtins(event))
