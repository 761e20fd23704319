"""The coding agents' output lines as typed Structs (bot/contracts/claude_code.py,
codex_exec.py): what a newer version adds is ignored, a known line in a wrong shape is said
plainly, the lenient cases stay lenient, and the protocol lines the adapter prints keep the
bytes the run log always kept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.contracts.coding_protocol import (
    AgentEvent,
    Log,
    Progress,
    Result,
    Session,
    Usage,
    line,
)
from bot.lifecycle.agents import aider, claude, codex
from bot.lifecycle.agents.base import failed, usage
from tests.fakes.agents import BIN


def lines(name: str) -> list[str]:
    return [text for text in (BIN / name).read_text().splitlines() if text.strip()]


def feed(parser: claude.ClaudeParser | codex.CodexParser, text: list[str]) -> list[AgentEvent]:
    return [event for each in text for event in parser.feed(each)]


def newer(text: str) -> str:
    """The line as a newer release might print it: a key of every kind added at each level
    (and in every list of objects)."""

    def grow(value: Any) -> Any:
        if isinstance(value, dict):
            grown = {key: grow(item) for key, item in value.items()}
            grown.update(added_in_9_9={"nested": [1, None, "x"]}, added_flag=True)
            return grown
        if isinstance(value, list):
            return [grow(item) for item in value]
        return value

    return json.dumps(grow(json.loads(text)))


def logs(events: list[AgentEvent]) -> list[str]:
    return [event.text for event in events if isinstance(event, Log)]


# -- what a newer version adds -------------------------------------------------------------


@pytest.mark.parametrize(
    "transcript", ["claude-2.1.332-success.jsonl", "claude-2.1.332-denied.jsonl"]
)
def test_claude_lines_with_keys_a_newer_version_adds_read_the_same(transcript: str) -> None:
    pinned, later = claude.ClaudeParser(), claude.ClaudeParser()
    assert feed(later, [newer(each) for each in lines(transcript)]) == feed(
        pinned, lines(transcript)
    )
    assert later.result(0, changed=True) == pinned.result(0, changed=True)


def test_claude_types_subtypes_and_blocks_a_newer_version_adds_are_skipped() -> None:
    added = [
        '{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}',
        '{"type":"system","subtype":"api_retry","attempt":1,"session_id":"s"}',
        '{"type":"system","subtype":"plugin_loaded","name":7}',
        '{"type":"stream_event","event":{"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"x"}}}',
        '{"type":"assistant","message":{"content":[{"type":"advisor_tool_result","x":1}]}}',
        '{"type":"hologram","anything":[1,2]}',
    ]
    parser = claude.ClaudeParser()
    assert feed(parser, added) == []
    assert feed(parser, lines("claude-2.1.332-success.jsonl"))[0] == Session(
        session_id="3980c19e-ebae-42df-a511-cda77399ad90"
    )


def test_codex_lines_with_keys_and_types_a_newer_version_adds_read_the_same() -> None:
    transcript = lines("codex-0.171.0-success.jsonl")
    added = [
        '{"type":"item.plan.delta","delta":"x"}',
        '{"type":"item.completed","item":{"id":"item_9","type":"plan","steps":[]}}',
        '{"type":"item.started","item":{"id":"item_8","type":"todo_list","items":[]}}',
    ]
    pinned = codex.CodexParser(prices={"input": 1.25, "output": 10.0})
    later = codex.CodexParser(prices={"input": 1.25, "output": 10.0})
    expected = feed(pinned, transcript)
    assert feed(later, added + [newer(each) for each in transcript]) == expected
    assert later.result(0, changed=True) == pinned.result(0, changed=True)


# -- lenient where the formats are -----------------------------------------------------------


@pytest.mark.parametrize(
    "parser", [claude.ClaudeParser, codex.CodexParser], ids=["claude", "codex"]
)
def test_text_lines_are_log_lines_and_other_json_makes_nothing(parser: type[Any]) -> None:
    # Not JSON: the agent's or its runtime's own text, kept in the run log as before.
    assert parser().feed("npm WARN deprecated something") == [
        Log(text="npm WARN deprecated something")
    ]
    # JSON that is not an object with a string `type`: nothing, as before.
    for other in ("", "   ", "42", '["a"]', "null", '{"no": "type"}', '{"type": 3}'):
        assert parser().feed(other) == [], other


# -- a known line in a wrong shape ----------------------------------------------------------


def test_a_malformed_claude_assistant_or_init_line_is_a_log_line_naming_the_key() -> None:
    parser = claude.ClaudeParser()
    bad_block = {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": 7}]}}
    assert logs(parser.feed(json.dumps(bad_block))) == [
        "Claude Code printed a malformed `assistant` line (Expected `str`, got `int` - at "
        "`$.name` (in `$.message.content[0]`))"
    ]
    no_content = {"type": "assistant", "message": {"role": "assistant"}}
    assert "missing required field `content`" in logs(parser.feed(json.dumps(no_content)))[0]
    no_session = {"type": "system", "subtype": "init", "model": "m"}
    (said,) = logs(parser.feed(json.dumps(no_session)))
    assert said.startswith("Claude Code printed a malformed `system` line")
    assert "`session_id`" in said and parser.session_id is None


def test_a_malformed_claude_result_fails_the_run_saying_which_key() -> None:
    transcript = lines("claude-2.1.332-success.jsonl")
    final = json.loads(transcript[-1])
    final["is_error"] = "no"  # not a boolean: the run's outcome cannot be read
    parser = claude.ClaudeParser()
    events = feed(parser, [*transcript[:-1], json.dumps(final)])
    assert not [event for event in events if isinstance(event, Usage)]
    result = parser.result(0, changed=True)
    assert result.status == "error"
    assert result.error == (
        "Claude Code printed a malformed `result` line (Expected `bool`, got `str` - at "
        "`$.is_error`)"
    )
    # A malformed result after a good one: the run's outcome is not known either.
    parser = claude.ClaudeParser()
    feed(parser, [*transcript, json.dumps(final)])
    assert parser.result(0, changed=True).status == "error"


def test_malformed_codex_lines_are_said_and_their_type_still_counts() -> None:
    parser = codex.CodexParser()
    events = feed(
        parser,
        [
            '{"type":"thread.started","thread_id":"t1"}',
            '{"type":"item.started","item":{"id":"item_1","type":"mcp_tool_call","tool":null}}',
            '{"type":"item.completed","item":"not an object"}',
            '{"type":"turn.completed","usage":{"input_tokens":"12"}}',
            '{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"ok"}}',
        ],
    )
    said = logs(events)
    assert said[0] == (
        "Codex printed a malformed `item.started` line (Expected `str`, got `null` - at "
        "`$.tool` (in `$.item`))"
    )
    assert said[1].startswith("Codex printed a malformed `item.completed` line")
    assert said[2] == (
        "Codex printed a malformed `turn.completed` line (Expected `int | null`, got `str` - "
        "at `$.usage.input_tokens`)"
    )
    # The turn completed whatever its usage looked like; only its usage is lost.
    assert parser.result(0, changed=True) == Result(status="done", summary="ok")
    parser = codex.CodexParser()
    feed(parser, ['{"type":"turn.completed"}', '{"type":"turn.failed","error":"boom"}'])
    assert parser.result(0, changed=True).status == "error"  # failed, whatever its shape


# -- the protocol lines the adapter prints ----------------------------------------------------


def test_protocol_lines_render_as_the_dicts_they_were_printed_as() -> None:
    events: list[tuple[AgentEvent, dict[str, object]]] = [
        (Session(session_id="s-1"), {"type": "session", "session_id": "s-1"}),
        (
            usage(240, 38, 0),
            {"type": "usage", "input_tokens": 240, "output_tokens": 38, "cost_usd": 0.0},
        ),
        (
            Log(text="Codex: Reconnecting… 2/5 ünïcode"),
            {"type": "log", "text": "Codex: Reconnecting… 2/5 ünïcode"},
        ),
        (
            Progress(action="edit", name="Write"),
            {"type": "progress", "action": "edit", "name": "Write"},
        ),
        (
            failed("Claude Code reached its turn limit", limit="turns"),
            {
                "type": "result",
                "status": "error",
                "error": "Claude Code reached its turn limit",
                "limit": "turns",
            },
        ),
        (
            Result(status="question", question="Redis?"),
            {"type": "result", "status": "question", "question": "Redis?"},
        ),
        (
            Result(status="done", summary="Done."),
            {"type": "result", "status": "done", "summary": "Done."},
        ),
    ]
    for event, printed in events:
        assert line(event) == json.dumps(printed)


def test_aider_output_makes_typed_events_too() -> None:
    parser = aider.AiderParser()
    assert parser.feed("Applied edit to a.py") == [Progress(action="edit", name="aider")]
    assert parser.feed("nothing to see") == []
    assert parser.result(0, changed=True) == Result(
        status="done", summary="aider applied edits to 1 file."
    )
