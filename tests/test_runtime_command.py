"""The command runtime: a real child process in the checkout, speaking the documented protocol."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from bot.runtimes.base import ContextBudget, Delta, Route, Status, Thinking, Usage
from bot.runtimes.command import CommandRuntime
from bot.runtimes.command_wire import PROTOCOL
from bot.runtimes.transport import UpstreamFailure
from tests.fakes.model_calls import (
    collect,
    collect_until_error,
    first_content_then_cancel,
    runtime_request,
    text_of,
)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "NOTES.md").write_text("checkout marker\n")
    return root


def command(tmp_path: Path, body: str, **options: object) -> CommandRuntime:
    script = tmp_path / f"cli_{abs(hash(body))}.py"
    script.write_text("import json, os, sys, time\n" + textwrap.dedent(body))
    line = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    settings: dict[str, object] = {"model": None, "context_tokens": 16_000, "read_timeout": 5.0}
    settings.update(options)
    return CommandRuntime(command=line, **settings)  # type: ignore[arg-type]


def emit(*events: dict[str, object]) -> str:
    return "".join(f"print(json.dumps({event!r}), flush=True)\n" for event in events)


async def test_protocol_events_map_to_thinking_delta_usage_and_route(
    tmp_path: Path, checkout: Path
) -> None:
    runtime = command(
        tmp_path,
        """
        request = json.loads(sys.stdin.readline())
        def out(**event): print(json.dumps(event), flush=True)
        out(type="route", model="local-coder-7b")
        out(type="thinking", text="Reading the request.")
        out(type="status", text="cli warming up")
        out(type="delta", text=f"{len(request['messages'])} message(s); ")
        out(type="delta", text=f"cwd has {open('NOTES.md').read().strip()}; ")
        out(type="delta", text=request["protocol"] + " " + request["messages"][-1]["content"])
        out(type="usage", input_tokens=120, output_tokens=30)
        out(type="done")
        """,
    )
    events = await collect(runtime, runtime_request(checkout, "ping"))
    assert events[0] == Route(model=runtime.model, endpoint=runtime.endpoint)
    assert runtime.endpoint.startswith("command:") and isinstance(events[1], ContextBudget)
    assert Route(model="local-coder-7b", endpoint=runtime.endpoint) in events
    assert text_of(events, Thinking) == "Reading the request."
    assert Status("cli warming up") in events
    assert text_of(events, Delta) == f"1 message(s); cwd has checkout marker; {PROTOCOL} ping"
    assert Usage(input_tokens=120, output_tokens=30) in events


async def test_the_request_on_stdin_is_the_documented_object(
    tmp_path: Path, checkout: Path
) -> None:
    runtime = command(
        tmp_path,
        """
        request = json.loads(sys.stdin.read())
        print(json.dumps({"type": "delta", "text": json.dumps(sorted(request))}), flush=True)
        """,
        model="m",
    )
    events = await collect(
        runtime, runtime_request(checkout, history=[("user", "a"), ("assistant", "b")])
    )
    assert json.loads(text_of(events, Delta)) == [
        "checkout",
        "max_output_tokens",
        "messages",
        "model",
        "protocol",
        "system",
    ]


async def test_the_request_bytes_are_the_json_the_protocol_always_wrote(
    tmp_path: Path, checkout: Path
) -> None:
    """The typed request writes what the dict before it did, byte for byte: `json.dumps`
    separators, ASCII escapes, key order, one newline."""
    runtime = command(
        tmp_path,
        """
        print(json.dumps({"type": "delta", "text": sys.stdin.buffer.read().hex()}), flush=True)
        """,
        model="m",
    )
    request = runtime_request(
        checkout, 'Ça va? ✓ "quoted"\n', history=[("user", "a"), ("assistant", "b")]
    )
    events = await collect(runtime, request)
    written = {
        "protocol": PROTOCOL,
        "model": "m",
        "system": request.system,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "max_output_tokens": request.max_output_tokens,
        "checkout": str(checkout),  # tmp_path is resolved already
    }
    assert bytes.fromhex(text_of(events, Delta)) == json.dumps(written).encode() + b"\n"


@pytest.mark.parametrize(
    ("printed", "said"),
    [
        ({"type": "delta", "text": 5}, "Expected `str`, got `int` - at `$.text`"),
        ({"type": "thinking"}, "Object missing required field `text`"),
        ({"type": "status", "text": None}, "Expected `str`, got `null` - at `$.text`"),
        (
            {"type": "usage", "input_tokens": "12"},
            "Expected `int`, got `str` - at `$.input_tokens`",
        ),
        ({"type": "usage", "output_tokens": -3}, "Expected `int` >= 0 - at `$.output_tokens`"),
        ({"type": "route", "model": ["m"]}, "Expected `str`, got `array` - at `$.model`"),
        (
            {"type": "error", "message": {"code": 1}},
            "Expected `str`, got `object` - at `$.message`",
        ),
    ],
)
async def test_a_malformed_protocol_line_fails_the_turn_naming_the_key(
    tmp_path: Path, checkout: Path, printed: dict[str, object], said: str
) -> None:
    lines = emit({"type": "delta", "text": "Half an answer"}, printed)
    events, error = await collect_until_error(command(tmp_path, lines), runtime_request(checkout))
    assert text_of(events, Delta) == "Half an answer"
    assert error.message.endswith(f" sent a malformed {PROTOCOL} line: {said}")
    assert error.before_content is False


async def test_a_malformed_protocol_line_never_echoes_what_the_command_printed(
    tmp_path: Path, checkout: Path
) -> None:
    hostile = "<script>alert(1)</script> sk-ant-api03-abcdefghijklmnop"
    lines = emit({"type": "status", "text": {hostile: hostile}, hostile: hostile})
    _, error = await collect_until_error(command(tmp_path, lines), runtime_request(checkout))
    assert error.message == (
        f"{command(tmp_path, lines).where} sent a malformed {PROTOCOL} line:"
        " Expected `str`, got `object` - at `$.text`"
    )
    assert error.before_content is True


async def test_objects_of_no_or_another_type_are_ignored_and_other_lines_are_text(
    tmp_path: Path, checkout: Path
) -> None:
    lines = emit(
        {"type": "novel", "text": 5},
        {"no": "type"},
        {"type": ["delta"]},
        {"type": None, "text": "x"},
        {"type": "delta", "text": "", "extra": [1]},
        {"type": "delta", "text": "kept", "added_later": {"nested": True}},
        {"type": "usage", "input_tokens": 3},
        {"type": "done"},
    )
    runtime = command(tmp_path, 'print("[1, 2]", flush=True)\n' + lines)
    events = await collect(runtime, runtime_request(checkout))
    assert text_of(events, Delta) == "[1, 2]\nkept" and Usage(3, 0) in events


async def test_claude_code_stream_json_is_understood(tmp_path: Path, checkout: Path) -> None:
    lines = emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": "s1",
            "model": "claude-sonnet-test",
            "tools": ["Read"],
        },
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "thinking", "thinking": "Plan the answer."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                ]
            },
        },
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "..."}]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "It is fine."}]}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "It is fine.",
            "usage": {"input_tokens": 400, "output_tokens": 50},
        },
    )
    events = await collect(command(tmp_path, lines), runtime_request(checkout))
    assert [e.model for e in events if isinstance(e, Route)][-1] == "claude-sonnet-test"
    assert text_of(events, Thinking) == "Plan the answer."
    assert text_of(events, Delta) == "It is fine."
    assert Status("tool · Read") in events and Usage(400, 50) in events


async def test_claude_code_partial_messages_are_not_doubled(tmp_path: Path, checkout: Path) -> None:
    lines = emit(
        {
            "type": "stream_event",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hel"},
            },
        },
        {
            "type": "stream_event",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "lo"},
            },
        },
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Hello"}]}},
        {"type": "result", "subtype": "success", "is_error": False, "usage": {}},
    )
    events = await collect(command(tmp_path, lines), runtime_request(checkout))
    assert text_of(events, Delta) == "Hello"


async def test_claude_code_lines_with_keys_a_newer_version_adds_are_understood(
    tmp_path: Path, checkout: Path
) -> None:
    added = {"added_in_9_9": {"nested": [1, None]}}
    lines = emit(
        {"type": "system", "subtype": "init", "session_id": "s", "model": "m2", **added},
        {"type": "system", "subtype": "hook_started", "hook": 3},
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}},
        {
            "type": "assistant",
            "message": {
                "content": [{"type": "text", "text": "Fine.", **added}],
                **added,
            },
            **added,
        },
        {"type": "assistant", "message": {"content": [{"type": "server_tool_use", "id": 1}]}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "usage": {"input_tokens": 4, "output_tokens": 2, **added},
            **added,
        },
    )
    events = await collect(command(tmp_path, lines), runtime_request(checkout))
    assert text_of(events, Delta) == "Fine." and Usage(4, 2) in events
    assert [e.model for e in events if isinstance(e, Route)][-1] == "m2"


@pytest.mark.parametrize(
    ("printed", "said"),
    [
        (
            {"type": "assistant", "message": {"content": [{"type": "text", "text": 5}]}},
            "Expected `str`, got `int` - at `$.text` (in `$.message.content[0]`)",
        ),
        (
            {"type": "result", "subtype": "success", "usage": {}},
            "Object missing required field `is_error`",
        ),
        (
            {"type": "stream_event", "event": {"type": "content_block_delta", "delta": {}}},
            "Object missing required field `index` (in `$.event`)",
        ),
    ],
)
async def test_a_malformed_claude_code_line_fails_the_turn_naming_the_key(
    tmp_path: Path, checkout: Path, printed: dict[str, object], said: str
) -> None:
    lines = emit({"type": "delta", "text": "Half an answer"}, printed)
    events, error = await collect_until_error(command(tmp_path, lines), runtime_request(checkout))
    assert text_of(events, Delta) == "Half an answer"
    assert error.message.endswith(f" sent a malformed Claude Code line: {said}")
    assert error.before_content is False


async def test_plain_text_output_is_the_reply(tmp_path: Path, checkout: Path) -> None:
    runtime = command(tmp_path, "sys.stdin.read()\nprint('line one')\nprint('line two')\n")
    events = await collect(runtime, runtime_request(checkout))
    assert text_of(events, Delta) == "line one\nline two\n"


async def test_nonzero_exit_is_an_error_with_stderr_tail_and_no_keys(
    tmp_path: Path, checkout: Path
) -> None:
    runtime = command(
        tmp_path,
        """
        print(json.dumps({"type": "delta", "text": "Starting"}), flush=True)
        print("Traceback: auth failed for key sk-live-abcdef1234567890", file=sys.stderr)
        sys.exit(3)
        """,
    )
    events, error = await collect_until_error(runtime, runtime_request(checkout))
    assert text_of(events, Delta) == "Starting"
    assert "exited with status 3" in error.message and "auth failed" in error.message
    assert "abcdef1234567890" not in error.message and error.before_content is False


async def test_reported_error_and_claude_code_error_result(tmp_path: Path, checkout: Path) -> None:
    first = command(tmp_path, emit({"type": "error", "message": "model not loaded"}))
    _, error = await collect_until_error(first, runtime_request(checkout))
    assert error.message == "the chat command reported: model not loaded"
    second = command(
        tmp_path,
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "result": "Credit balance is too low",
            }
        ),
    )
    _, error = await collect_until_error(second, runtime_request(checkout))
    assert "Credit balance is too low" in error.message


async def test_exit_without_an_answer_is_an_error(tmp_path: Path, checkout: Path) -> None:
    _, error = await collect_until_error(command(tmp_path, "pass\n"), runtime_request(checkout))
    assert "exited without an answer" in error.message


async def test_missing_command_and_missing_checkout_are_clear(
    tmp_path: Path, checkout: Path
) -> None:
    missing = CommandRuntime(command="no-such-cli-xyz --flag", model=None, context_tokens=8000)
    _, error = await collect_until_error(missing, runtime_request(checkout))
    assert (
        error.message
        == "the chat command 'no-such-cli-xyz' was not found (STEELFRAME_CHAT_COMMAND)"
    )
    runtime = command(tmp_path, "print('x')\n")
    _, error = await collect_until_error(runtime, runtime_request(tmp_path / "gone"))
    assert "is not a directory" in error.message


async def test_silence_past_the_timeout_ends_the_process(tmp_path: Path, checkout: Path) -> None:
    pid_file = tmp_path / "pid"
    runtime = command(
        tmp_path,
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
        read_timeout=0.3,
    )
    _, error = await collect_until_error(runtime, runtime_request(checkout))
    assert isinstance(error, UpstreamFailure) and "printed nothing for 0.3 s" in error.message
    await _gone(int(pid_file.read_text()))


async def test_cancelling_a_turn_kills_the_command_and_its_children(
    tmp_path: Path, checkout: Path
) -> None:
    pid_file = tmp_path / "pids"
    runtime = command(
        tmp_path,
        f"""
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        print(json.dumps({{"type": "delta", "text": "working"}}), flush=True)
        time.sleep(60)
        """,
    )
    seen = await first_content_then_cancel(runtime.stream(runtime_request(checkout)))
    assert text_of(seen, Delta) == "working"
    for pid in map(int, pid_file.read_text().split()):
        await _gone(pid)


async def test_the_command_does_not_inherit_the_apps_secrets(
    tmp_path: Path, checkout: Path
) -> None:
    environ = {
        "PATH": os.environ.get("PATH", ""),
        "WEBHOOK_SECRET": "whsec",
        "PRIVATE_KEY": "pem",
        "STEELFRAME_DATABASE_URL": "postgresql://u:p@h/db",
        "ANTHROPIC_API_KEY": "for-the-cli",
    }
    runtime = command(
        tmp_path,
        """
        names = ["WEBHOOK_SECRET", "PRIVATE_KEY", "STEELFRAME_DATABASE_URL", "ANTHROPIC_API_KEY"]
        print(json.dumps({"type": "delta", "text": ",".join(n for n in names if n in os.environ)}))
        """,
        environ=environ,
    )
    events = await collect(runtime, runtime_request(checkout))
    assert text_of(events, Delta) == "ANTHROPIC_API_KEY"


async def _gone(pid: int) -> None:
    """Wait (polling briefly) until `pid` no longer runs; reap it if it is our child."""
    # Generous for a loaded machine, yet under the 60 s the tests' sleepers would take to end
    # by themselves.
    async with asyncio.timeout(30):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            if _zombie(pid):  # exited, waiting for its parent to reap it
                return
            await asyncio.sleep(0.02)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True  # gone between the two checks
