"""Claude Code (`claude -p --output-format stream-json --verbose`): the command line and
the stream-json parser (../shared/agents/coding-agents.md, section 1; version 2.1.332).

Success is `is_error == false` and exit status 0. An API failure is `subtype: success` with
`is_error: true` and exit 1; a tool denied by the permission mode still ends `success`, exit
0, with `permission_denials`; `--max-turns` ends `error_max_turns`, exit 1. Key order is not
stable and new keys appear often: lines are parsed as JSON and unknown types are ignored.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bot.lifecycle.agents.base import (
    AgentRun,
    Event,
    Launch,
    as_float,
    as_int,
    asked,
    done,
    failed,
    find_question,
    json_object,
    log,
    progress,
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
        self.final: dict[str, Any] | None = None
        self.denied: list[str] = []

    def feed(self, line: str) -> list[Event]:
        message = json_object(line)
        if isinstance(message, list):
            return message
        kind, subtype = message.get("type"), message.get("subtype")
        if kind == "system" and subtype == "init":
            return self._session(message.get("session_id"))
        if kind == "system" and subtype == "permission_denied":
            return [log(f"Claude Code was denied {message.get('tool_name', 'a tool')}")]
        if kind == "assistant":
            return self._assistant(message)
        if kind == "result":
            self.final = message
            self.denied = [
                str(d.get("tool_name", "?"))
                for d in message.get("permission_denials") or []
                if isinstance(d, dict)
            ]
            return [*self._session(message.get("session_id")), self._usage(message)]
        return []

    def _session(self, session_id: Any) -> list[Event]:
        if not session_id or session_id == self.session_id:
            return []
        self.session_id = str(session_id)
        return [{"type": "session", "session_id": self.session_id}]

    def _assistant(self, message: dict[str, Any]) -> list[Event]:
        events: list[Event] = []
        if message.get("error"):
            events.append(log(f"Claude Code: model error {message['error']}"))
        content = (message.get("message") or {}).get("content") or []
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = str(block.get("name") or "tool")
                action = "edit" if name in EDIT_TOOLS else "command" if name == "Bash" else "tool"
                events.append(progress(action, name))
        return events

    @staticmethod
    def _usage(result: dict[str, Any]) -> Event:
        counts = result.get("usage") or {}
        spent = (
            as_int(counts.get("input_tokens"))
            + as_int(counts.get("cache_creation_input_tokens"))
            + as_int(counts.get("cache_read_input_tokens"))
        )
        # Old builds named the cost `cost_usd` / `total_cost` (CHANGELOG 1.0.22).
        cost = result.get("total_cost_usd", result.get("cost_usd", result.get("total_cost")))
        return usage(spent, as_int(counts.get("output_tokens")), as_float(cost))

    def result(self, exit_code: int, *, changed: bool) -> Event:
        final = self.final
        if final is None:
            return failed(f"Claude Code exited with status {exit_code} without a result")
        subtype = str(final.get("subtype") or "")
        if subtype == "error_max_turns":
            return {**failed("Claude Code reached its turn limit"), "limit": "turns"}
        if subtype == "error_max_budget_usd":
            return {**failed("Claude Code reached its cost budget"), "limit": "cost"}
        if final.get("is_error") is not False or exit_code != 0:
            if final.get("terminal_reason") == "api_error":
                status = final.get("api_error_status")
                return failed(
                    "Claude Code could not get an answer from its model API"
                    + (f" (HTTP {status})" if status else "")
                )
            return failed(f"Claude Code ended with an error ({subtype or 'unknown'})")
        text = str(final.get("result") or "")
        question = find_question(text)
        if question:
            return asked(question)
        if self.denied and not changed:
            tools = ", ".join(sorted(set(self.denied)))
            return failed(f"Claude Code was denied permission ({tools}) and changed nothing")
        return done(text or "Claude Code finished.")
