"""Claude Code (`claude -p --output-format stream-json --verbose`): the command line and
the stream-json parser (../shared/agents/coding-agents.md, section 1; version 2.1.332).

Success is `is_error == false` and exit status 0. An API failure is `subtype: success` with
`is_error: true` and exit 1; a tool denied by the permission mode still ends `success`, exit
0, with `permission_denials`; `--max-turns` ends `error_max_turns`, exit 1. Key order is not
stable and new keys appear often: lines decode as the Structs of bot/contracts/claude_code.py,
whatever their key order, and unknown types are ignored. A line of a known type in a shape
the format does not have is said in the run log; a malformed `result` fails the run, naming
the key, rather than reading as a run that printed no result.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from bot.contracts.claude_code import (
    BLOCKS,
    LINES,
    SYSTEM,
    Assistant,
    Init,
    PermissionDenied,
    Result,
    ResultUsage,
    System,
    ToolUseBlock,
)
from bot.contracts.coding_protocol import AgentEvent, ProgressAction, Session
from bot.contracts.coding_protocol import Result as Outcome
from bot.lifecycle.agents.base import (
    AgentRun,
    Launch,
    MalformedLine,
    as_float,
    as_int,
    asked,
    done,
    failed,
    find_question,
    log,
    progress,
    read_line,
    usage,
)

BINARY = "claude"
# Edits are approved without asking and these tools run; anything else would "ask", which
# in -p mode is a denial (reported in permission_denials). The coding sandbox is the
# boundary; bypassPermissions is refused to root, which a sandbox user may appear as.
PERMISSION_MODE = "acceptEdits"
ALLOWED_TOOLS = "Bash,Read,Edit,MultiEdit,Write,Glob,Grep,LS,TodoWrite"
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# Quiet, CI-friendly: no updater, no telemetry, no non-essential traffic (section 1.2).
QUIET_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def launch(run: AgentRun) -> Launch:
    argv = [BINARY, "-p", "--output-format", "stream-json", "--verbose"]
    argv += ["--permission-mode", PERMISSION_MODE, "--allowedTools", ALLOWED_TOOLS]
    argv += ["--max-turns", str(run.max_turns)]
    if run.budget_usd is not None:
        argv += ["--max-budget-usd", f"{run.budget_usd:.4f}"]
    if run.model:
        argv += ["--model", run.model]
    if run.resume:
        argv += ["--resume", run.resume]
    # The prompt on stdin: it can be longer than one argument may be.
    return Launch(argv=tuple(argv), stdin=run.prompt, env=QUIET_ENV)


def project_dir(home: Path, cwd: Path) -> Path:
    """Where Claude Code keeps a cwd's sessions: `~/.claude/projects/<cwd, / as ->`."""
    return home / ".claude" / "projects" / str(cwd).replace("/", "-")


def carry_session(home: Path, cwd: Path, session_id: str) -> bool:
    """Make a session from an earlier run resumable here: sessions are filed by cwd, and
    every run works in a fresh directory. False when no such session is kept."""
    name = f"{session_id}.jsonl"
    if "/" in session_id or not session_id:
        return False
    target = project_dir(home, cwd) / name
    if target.exists():
        return True
    for found in sorted((home / ".claude" / "projects").glob(f"*/{name}")):
        if found.is_file() and not found.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(found, target)
            return True
    return False


class ClaudeParser:
    def __init__(self) -> None:
        self.session_id: str | None = None
        self.final: Result | None = None
        self.denied: list[str] = []
        self.malformed: MalformedLine | None = None  # the result line's, when it was

    def feed(self, line: str) -> list[AgentEvent]:
        try:
            return self._line(line)
        except MalformedLine as exc:
            if exc.kind == "result":  # the run's outcome is not known: it fails, saying why
                self.final, self.malformed = None, exc
            return [log(f"Claude Code printed {exc}")]

    def _line(self, line: str) -> list[AgentEvent]:
        message = read_line(LINES, line)
        if isinstance(message, list):
            return message
        if isinstance(message, System):
            return self._system(line)
        if isinstance(message, Assistant):
            return self._assistant(message)
        if isinstance(message, Result):
            self.final, self.malformed = message, None
            self.denied = [denial.tool_name for denial in message.permission_denials]
            return [*self._session(message.session_id), self._usage(message)]
        return []  # stream_event: only with --include-partial-messages, not passed here

    def _system(self, line: str) -> list[AgentEvent]:
        event = read_line(SYSTEM, line)
        if isinstance(event, Init):
            return self._session(event.session_id)
        if isinstance(event, PermissionDenied):
            return [log(f"Claude Code was denied {event.tool_name}")]
        return []  # api_retry, status, compact_boundary, task_*, hook_*: informational

    def _session(self, session_id: str | None) -> list[AgentEvent]:
        if not session_id or session_id == self.session_id:
            return []
        self.session_id = session_id
        return [Session(session_id=session_id)]

    @staticmethod
    def _assistant(message: Assistant) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        if message.error:
            events.append(log(f"Claude Code: model error {message.error}"))
        for index, raw in enumerate(message.message.content):
            try:
                block = BLOCKS.decode(raw, at=f"$.message.content[{index}]")
            except msgspec.ValidationError as exc:
                raise MalformedLine("assistant", str(exc)[:300]) from None
            if isinstance(block, ToolUseBlock):
                name = block.name or "tool"
                action: ProgressAction = (
                    "edit" if name in EDIT_TOOLS else "command" if name == "Bash" else "tool"
                )
                events.append(progress(action, name))
        return events

    @staticmethod
    def _usage(result: Result) -> AgentEvent:
        counts = result.usage or ResultUsage()
        spent = (
            as_int(counts.input_tokens)
            + as_int(counts.cache_creation_input_tokens)
            + as_int(counts.cache_read_input_tokens)
        )
        return usage(spent, as_int(counts.output_tokens), as_float(result.cost()))

    def result(self, exit_code: int, *, changed: bool) -> Outcome:
        final = self.final
        if final is None and self.malformed is not None:
            return failed(f"Claude Code printed {self.malformed}")
        if final is None:
            return failed(f"Claude Code exited with status {exit_code} without a result")
        subtype = final.subtype
        if subtype == "error_max_turns":
            return failed("Claude Code reached its turn limit", limit="turns")
        if subtype == "error_max_budget_usd":
            return failed("Claude Code reached its cost budget", limit="cost")
        if final.is_error or exit_code != 0:
            if final.terminal_reason == "api_error":
                status = final.api_error_status
                return failed(
                    "Claude Code could not get an answer from its model API"
                    + (f" (HTTP {status})" if status else "")
                )
            return failed(f"Claude Code ended with an error ({subtype or 'unknown'})")
        text = final.result or ""
        question = find_question(text)
        if question:
            return asked(question)
        if self.denied and not changed:
            tools = ", ".join(sorted(set(self.denied)))
            return failed(f"Claude Code was denied permission ({tools}) and changed nothing")
        return done(text or "Claude Code finished.")
