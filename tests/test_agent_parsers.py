"""The agent parsers on the documented transcripts (coding-agents.md), without a process:
what each line becomes, and what the run's result is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.contracts.coding_protocol import AgentEvent, Log, Progress, Result, Session, Usage
from bot.lifecycle.agents import aider, claude, codex
from bot.lifecycle.agents.base import AgentRun, find_question
from bot.lifecycle.agents.presets import PRESETS, Agent, version_in
from bot.lifecycle.agents.tally import Tally
from tests.fakes.agents import BIN


def lines(name: str) -> list[str]:
    return [line for line in (BIN / name).read_text().splitlines() if line.strip()]


def feed(
    parser: claude.ClaudeParser | codex.CodexParser | aider.AiderParser, text: list[str]
) -> list[AgentEvent]:
    return [event for line in text for event in parser.feed(line)]


def test_claude_success_transcript_gives_session_progress_usage_and_done() -> None:
    parser = claude.ClaudeParser()
    events = feed(parser, lines("claude-2.1.332-success.jsonl"))
    assert events[0] == Session(session_id="3980c19e-ebae-42df-a511-cda77399ad90")
    assert Progress(action="edit", name="Write") in events
    assert Usage(input_tokens=240, output_tokens=38, cost_usd=0.00129) in events
    assert parser.result(0, changed=True) == Result(
        status="done", summary="Done: created hello.txt."
    )


def test_claude_result_is_found_whatever_its_key_order() -> None:
    final = json.loads(lines("claude-2.1.332-success.jsonl")[-1])
    assert next(iter(final)) != "type"  # the observed line is not type-first
    parser = claude.ClaudeParser()
    parser.feed(json.dumps(dict(sorted(final.items()))))
    assert parser.result(0, changed=True).status == "done"


def test_claude_api_error_is_success_subtype_with_is_error_and_fails() -> None:
    parser = claude.ClaudeParser()
    final = json.loads(lines("claude-2.1.332-success.jsonl")[-1])
    final.update(is_error=True, terminal_reason="api_error", result="API Error: boom")
    parser.feed(json.dumps(final))
    result = parser.result(1, changed=False)
    assert result.status == "error" and "model API" in str(result.error)
    assert "boom" not in str(result.error)  # the error text is the worker's words


def test_claude_max_turns_and_budget_are_limits() -> None:
    parser = claude.ClaudeParser()
    parser.feed(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True}))
    assert parser.result(1, changed=False).limit == "turns"
    parser = claude.ClaudeParser()
    parser.feed(json.dumps({"type": "result", "subtype": "error_max_budget_usd", "is_error": True}))
    assert parser.result(1, changed=False).limit == "cost"


def test_claude_denial_without_a_change_fails_and_exit_zero_is_not_enough() -> None:
    parser = claude.ClaudeParser()
    events = feed(parser, lines("claude-2.1.332-denied.jsonl"))
    assert any(isinstance(e, Log) and "denied Write" in e.text for e in events)
    final = json.loads(lines("claude-2.1.332-success.jsonl")[-1])
    final["permission_denials"] = [{"tool_name": "Write", "tool_use_id": "t", "tool_input": {}}]
    parser.feed(json.dumps(final))
    assert parser.result(0, changed=False).status == "error"
    assert parser.result(0, changed=True).status == "done"


def test_claude_without_a_result_line_fails() -> None:
    parser = claude.ClaudeParser()
    feed(parser, lines("claude-2.1.332-success.jsonl")[:2])
    assert parser.result(0, changed=True).status == "error"


def test_claude_question_marker_becomes_a_question() -> None:
    parser = claude.ClaudeParser()
    final = json.loads(lines("claude-2.1.332-success.jsonl")[-1])
    final["result"] = "I looked.\nSTEELFRAME-QUESTION: Redis or SQLite?"
    parser.feed(json.dumps(final))
    assert parser.result(0, changed=False) == Result(status="question", question="Redis or SQLite?")


def test_claude_command_line_follows_the_documented_headless_invocation(tmp_path: Path) -> None:
    run = AgentRun(
        prompt="p", cwd=tmp_path, model="sonnet", max_turns=7, budget_usd=0.5, resume="s1"
    )
    launch = claude.launch(run)
    argv = list(launch.argv)
    assert argv[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert argv[argv.index("--max-turns") + 1] == "7"
    assert argv[argv.index("--max-budget-usd") + 1] == "0.5000"
    assert argv[argv.index("--resume") + 1] == "s1"
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert launch.stdin == "p"


def test_claude_session_of_an_earlier_run_is_carried_to_this_cwd(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = claude.project_dir(home, Path("/work/run-1/repo"))
    old.mkdir(parents=True)
    (old / "s1.jsonl").write_text("{}\n")
    assert claude.carry_session(home, Path("/work/run-2/repo"), "s1")
    assert (claude.project_dir(home, Path("/work/run-2/repo")) / "s1.jsonl").exists()
    assert not claude.carry_session(home, Path("/x"), "missing")
    assert not claude.carry_session(home, Path("/x"), "../s1")


def test_codex_success_transcript_tolerates_reconnect_errors_and_warnings() -> None:
    parser = codex.CodexParser(prices={"input": 1.25, "output": 10.0})
    events = feed(parser, lines("codex-0.171.0-success.jsonl"))
    assert events[0] == Session(session_id="01a2309f-3e0c-7131-8437-cf8bea381ecb")
    assert [e for e in events if isinstance(e, Progress)] == [
        Progress(action="command", name="shell")
    ]
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage == [Usage(input_tokens=2400, output_tokens=100, cost_usd=0.004)]
    assert parser.result(0, changed=True).summary == "Done: created hello.txt."


def test_codex_turn_failed_is_a_failure() -> None:
    parser = codex.CodexParser()
    feed(parser, lines("codex-0.171.0-success.jsonl")[:3] + lines("codex-0.171.0-failure.jsonl"))
    result = parser.result(1, changed=False)
    assert result.status == "error" and "sk-bad" not in str(result.error)


def test_codex_command_line_resumes_with_flags_before_resume(tmp_path: Path) -> None:
    argv = codex.launch(AgentRun(prompt="go on", cwd=tmp_path, resume="t1")).argv
    assert argv[:3] == ("codex", "exec", "--json")
    assert "--skip-git-repo-check" in argv and "--full-auto" not in argv
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"
    assert argv[-4:] == ("resume", "t1", "--", "go on")
    assert codex.launch(AgentRun(prompt="x", cwd=tmp_path)).stdin is None  # /dev/null


def test_aider_applied_edits_and_usage_line() -> None:
    parser = aider.AiderParser()
    events = feed(
        parser,
        [
            "Applied edit to hello.txt",
            "Tokens: 2.1k sent, 1.2k cache write, 120 received. Cost: $0.0081 message, "
            "$0.0081 session.",
        ],
    )
    assert events[0] == Progress(action="edit", name="aider")
    assert events[1] == Usage(input_tokens=2100, output_tokens=120, cost_usd=0.0081)
    assert parser.result(0, changed=True).status == "done"


@pytest.mark.parametrize(
    "line",
    ["The LLM did not conform to the edit format.", "Empty response received from LLM. Check"],
)
def test_aider_exit_zero_with_an_error_line_and_no_change_is_a_failure(line: str) -> None:
    parser = aider.AiderParser()
    parser.feed(line)
    assert parser.result(0, changed=False).status == "error"


def test_aider_command_line_never_lets_aider_commit(tmp_path: Path) -> None:
    argv = aider.launch(AgentRun(prompt="do it", cwd=tmp_path), tmp_path).argv
    for flag in ("--yes-always", "--no-auto-commits", "--no-dirty-commits", "--no-pretty"):
        assert flag in argv
    assert (tmp_path / "message.md").read_text() == "do it"


def test_question_marker_only_counts_at_the_start_of_a_line() -> None:
    assert find_question("say STEELFRAME-QUESTION: no") is None
    assert find_question("a\n**STEELFRAME-QUESTION:** which one?") == "which one?"


def test_versions_are_read_from_each_clis_version_line() -> None:
    assert version_in("2.1.332 (Claude Code)") == "2.1.332"
    assert version_in("codex-cli 0.171.0") == "0.171.0"
    assert version_in("aider 0.86.2") == "0.86.2"
    assert PRESETS[Agent.CLAUDE].supports("2.1.332")
    assert not PRESETS[Agent.CODEX].supports("0.44.0")


def test_progress_in_words_is_throttled() -> None:
    tally = Tally()
    tally.add("command", "Bash")
    tally.add("edit", "Write")
    tally.add("tool", "Grep")
    assert tally.words("Claude Code") == (
        "Claude Code is working: 1 command run; 1 file edit; 1 other tool call (Grep)."
    )
    assert tally.due(100.0) and not tally.due(101.0) and tally.due(116.0)


def test_doctor_lists_each_agent_with_its_version_and_flags_the_configured_one(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    env.update(PATH=f"{BIN}:/usr/bin:/bin", FAKE_CODEX_VERSION="0.44.0")
    env["STEELFRAME_CODING_AGENT"] = "codex"
    doctor = [sys.executable, "-m", "steelframe.cli", "doctor"]
    run = subprocess.run(doctor, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert "claude  Claude Code  2.1.332    supported" in run.stdout
    assert "unsupported version (the preset is written for 0.171.0)" in run.stdout
    env["STEELFRAME_CODING_AGENT"] = "claude"
    run = subprocess.run(doctor, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.endswith("ok\n"), run.stdout
    env["PATH"] = "/usr/bin:/bin"
    run = subprocess.run(doctor, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1 and "not installed (install: npm install -g" in run.stdout
