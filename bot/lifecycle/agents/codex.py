"""Codex CLI (`codex exec --json`): the command line and the JSONL parser
(../shared/agents/coding-agents.md, section 2; version 0.171.0).

`thread.started` carries the id `codex exec resume` takes; `turn.completed` the usage;
`turn.failed` is the failure. Top-level `error` events are not fatal (0.171 reports
reconnects with them) and neither are `error` items. With the network down Codex never
exits: the worker's time limit kills it. stdin is /dev/null: Codex reads a piped stdin.
Lines decode as the Structs of bot/contracts/codex_exec.py; unknown event and item types are
ignored, and a line of a known type in a shape the format does not have is said in the run
log (a malformed `turn.failed` still fails the run, a malformed `turn.completed` still
completes the turn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import msgspec

from bot.contracts.codex_exec import (
    EVENTS,
    ITEMS,
    AgentMessage,
    CommandExecution,
    ErrorItem,
    FileChange,
    ItemCompleted,
    ItemStarted,
    McpToolCall,
    StreamError,
    ThreadItem,
    ThreadStarted,
    TurnCompleted,
    TurnFailed,
    TurnUsage,
    WebSearch,
)
from bot.contracts.coding_protocol import AgentEvent, Result, Session
from bot.lifecycle.agents.base import (
    AgentRun,
    Launch,
    MalformedLine,
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

BINARY = "codex"
# Settings that keep a run to the model's API (keys of Codex's config reference). With its
# `plugins` feature on, 0.171 syncs the plugin marketplace at start (github.com,
# api.github.com, chatgpt.com), which the run's egress proxy refuses and shows on the task;
# the update check and analytics are off for the same reason.
QUIET_SETTINGS = (
    "features.plugins=false",
    "check_for_update_on_startup=false",
    "analytics.enabled=false",
)


def launch(run: AgentRun, *, base_url: str | None = None) -> Launch:
    # `--full-auto` is gone in 0.171 (exit 2); exec mode never prompts, and the approval
    # policy is set explicitly so a user config cannot change it.
    argv = [BINARY, "exec", "--json", "--sandbox", "workspace-write", "--skip-git-repo-check"]
    argv += ["--color", "never", "-c", 'approval_policy="never"']
    argv += [item for setting in QUIET_SETTINGS for item in ("-c", setting)]
    if base_url:
        argv += ["-c", f"openai_base_url={json.dumps(base_url)}"]
    if run.model:
        argv += ["--model", run.model]
    if run.resume:
        # Flags before `resume`, as the SDK passes them: `resume` lists fewer of its own.
        argv += ["resume", run.resume]
    argv += ["--", run.prompt]
    return Launch(argv=tuple(argv), stdin=None)


class CodexParser:
    def __init__(self, prices: Mapping[str, float] | None = None) -> None:
        self.thread_id: str | None = None
        self.message = ""
        self.completed = False
        self.failure: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.prices = prices or {}
        self._started: set[str] = set()

    def feed(self, line: str) -> list[AgentEvent]:
        try:
            return self._line(line)
        except MalformedLine as exc:
            # What the type says stands whatever the shape: the turn failed, or completed
            # (its usage, unread, is lost: the protocol's totals miss that turn).
            if exc.kind == "turn.failed":
                self.failure = "(malformed)"
            elif exc.kind == "turn.completed":
                self.completed = True
            return [log(f"Codex printed {exc}")]

    def _line(self, line: str) -> list[AgentEvent]:
        event = read_line(EVENTS, line)
        if isinstance(event, list):
            return event
        if isinstance(event, ThreadStarted):
            if not event.thread_id or self.thread_id == event.thread_id:
                return []
            self.thread_id = event.thread_id
            return [Session(session_id=self.thread_id)]
        if isinstance(event, ItemStarted | ItemCompleted):
            started = isinstance(event, ItemStarted)
            try:
                item = ITEMS.decode(event.item, at="$.item")
            except msgspec.ValidationError as exc:
                kind = "item.started" if started else "item.completed"
                raise MalformedLine(kind, str(exc)[:300]) from None
            return [] if item is None else self._item(item, started=started)
        if isinstance(event, TurnCompleted):
            self.completed = True
            return [self._usage(event.usage or TurnUsage())]
        if isinstance(event, TurnFailed):
            self.failure = event.error.message
            return [log(f"Codex turn failed: {self.failure}")]
        if isinstance(event, StreamError):
            return [log(f"Codex: {event.message}")]  # not fatal (reconnects)
        return []

    def _item(self, item: ThreadItem, *, started: bool) -> list[AgentEvent]:
        if isinstance(item, AgentMessage):
            if not started:
                self.message = item.text
            return []
        if isinstance(item, ErrorItem):
            return [log(f"Codex warning: {item.message}")]
        # One progress line per item: at its start, or at completion if it never started.
        if item.id in self._started:
            return []
        if started:
            self._started.add(item.id)
        if isinstance(item, CommandExecution):
            return [progress("command", "shell")]
        if isinstance(item, FileChange):
            return [progress("edit", "file_change")] * max(len(item.changes), 1)
        if isinstance(item, McpToolCall):
            return [progress("tool", item.tool or "mcp")]
        if isinstance(item, WebSearch):
            return [progress("tool", "web_search")]
        return []

    def _usage(self, counts: TurnUsage) -> AgentEvent:
        # Each turn reports its own usage; the protocol wants this run's running totals.
        self.input_tokens += as_int(counts.input_tokens)
        self.output_tokens += as_int(counts.output_tokens) + as_int(counts.reasoning_output_tokens)
        cost = (
            self.input_tokens * float(self.prices.get("input", 0.0))
            + self.output_tokens * float(self.prices.get("output", 0.0))
        ) / 1_000_000
        return usage(self.input_tokens, self.output_tokens, cost)

    def result(self, exit_code: int, *, changed: bool) -> Result:
        if self.failure is not None:
            return failed("Codex could not finish the turn (its model API failed)")
        if exit_code != 0 or not self.completed:
            return failed(f"Codex exited with status {exit_code} before the turn completed")
        question = find_question(self.message)
        if question:
            return asked(question)
        return done(self.message or "Codex finished.")
