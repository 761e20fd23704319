"""The worker's reading of the coding command's protocol lines (bot/lifecycle/coding_lines.py):
the lines the presets print read back as the Structs they were, keys and types the protocol
does not have are passed over, and a protocol line in another shape is said naming the key,
never echoing the command's value. The run around it: tests/test_lifecycle_core.py."""

from __future__ import annotations

import json

import pytest

from bot.contracts.coding_protocol import AgentEvent, Log, Progress, Result, Session, Usage, line
from bot.lifecycle.agents.base import failed, usage
from bot.lifecycle.coding_lines import Malformed, read_line


@pytest.mark.parametrize(
    "event",
    [
        Session(session_id="s-1"),
        Session(session_id="s-1", transcript="t.jsonl"),
        usage(240, 38, 0.25),
        Log(text="Codex: Reconnecting… 2/5 ünïcode"),
        Progress(action="edit", name="Write"),
        failed("Claude Code reached its turn limit", limit="turns"),
        Result(status="question", question="Redis?"),
        Result(status="done", summary="Done."),
    ],
)
def test_a_line_a_preset_prints_reads_back_as_its_struct(event: AgentEvent) -> None:
    assert read_line(line(event)) == event


@pytest.mark.parametrize(
    "text",
    [
        "plain text from the agent",
        "{not json",
        "[1, 2]",
        '"a string"',
        '{"no_type": 1}',
        '{"type": 5}',
        '{"type": "heartbeat", "at": 3}',  # a type the protocol does not have (yet)
    ],
)
def test_what_is_not_a_protocol_line_is_log_text(text: str) -> None:
    assert read_line(text) is None


def test_keys_a_line_type_does_not_have_are_ignored() -> None:
    text = json.dumps(
        {"type": "result", "status": "done", "summary": "ok", "session_id": "s-9", "extra": [1]}
    )
    assert read_line(text) == Result(status="done", summary="ok")


def test_a_usage_line_may_leave_out_a_total_it_does_not_keep() -> None:
    text = json.dumps({"type": "usage", "input_tokens": 5, "output_tokens": 7})
    assert read_line(text) == Usage(input_tokens=5, output_tokens=7, cost_usd=0.0)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        # A number in a string is not guessed at: the protocol's numbers are JSON numbers.
        (
            {"type": "usage", "input_tokens": "12"},
            "Expected `int`, got `str` - at `$.input_tokens`",
        ),
        ({"type": "usage", "cost_usd": "lots"}, "Expected `float`, got `str` - at `$.cost_usd`"),
        ({"type": "usage", "output_tokens": None}, "got `null` - at `$.output_tokens`"),
        ({"type": "session"}, "missing required field `session_id`"),
        ({"type": "progress", "action": "command", "name": 3}, "at `$.name`"),
        ({"type": "log", "text": ["a"]}, "Expected `str`, got `array` - at `$.text`"),
    ],
)
def test_a_protocol_line_in_another_shape_is_malformed_naming_the_key(
    fields: dict[str, object], problem: str
) -> None:
    found = read_line(json.dumps(fields))
    assert isinstance(found, Malformed) and found.kind == fields["type"]
    assert problem in found.problem
    assert found.note().startswith(f"the coding command printed a malformed `{fields['type']}`")


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"type": "result", "status": "ghp_secret<!-- x -->"}, "$.status"),
        ({"type": "result", "status": "error", "limit": "ghp_secret"}, "$.limit"),
        ({"type": "progress", "action": "ghp_secret", "name": "Bash"}, "$.action"),
    ],
)
def test_a_value_the_protocol_does_not_list_is_named_by_its_key_never_echoed(
    fields: dict[str, object], key: str
) -> None:
    found = read_line(json.dumps(fields))
    assert isinstance(found, Malformed)
    assert found.problem == f"a value the protocol does not list - at `{key}`"
    assert "ghp_secret" not in found.note()
