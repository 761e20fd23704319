"""Codex CLI (`codex exec --json`): the command line and the JSONL parser
(../shared/agents/coding-agents.md, section 2; version 0.171.0).

`thread.started` carries the id `codex exec resume` takes; `turn.completed` the usage;
`turn.failed` is the failure. Top-level `error` events are not fatal (0.171 reports
reconnects with them) and neither are `error` items. With the network down Codex never
exits: the worker's time limit kills it. stdin is /dev/null: Codex reads a piped stdin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.lifecycle.agents.base import (
    AgentRun,
    Event,
    Launch,
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

    def feed(self, line: str) -> list[Event]:
        event = json_object(line)
        if isinstance(event, list):
            return event
        kind = event.get("type")
        if kind == "thread.started" and event.get("thread_id"):
            if self.thread_id == event["thread_id"]:
                return []
            self.thread_id = str(event["thread_id"])
            return [{"type": "session", "session_id": self.thread_id}]
        if kind in ("item.started", "item.completed") and isinstance(event.get("item"), dict):
            return self._item(event["item"], started=kind == "item.started")
        if kind == "turn.completed":
            self.completed = True
            return [self._usage(event.get("usage") or {})]
        if kind == "turn.failed":
            error = event.get("error") or {}
            self.failure = str(error.get("message") if isinstance(error, dict) else error)
            return [log(f"Codex turn failed: {self.failure}")]
        if kind == "error":
            return [log(f"Codex: {event.get('message', '')}")]  # not fatal (reconnects)
        return []

    def _item(self, item: dict[str, Any], *, started: bool) -> list[Event]:
        kind, item_id = item.get("type"), str(item.get("id", ""))
        if kind == "agent_message" and not started:
            self.message = str(item.get("text") or "")
            return []
        if kind == "error":
            return [log(f"Codex warning: {item.get('message', '')}")]
        # One progress line per item: at its start, or at completion if it never started.
        if item_id in self._started:
            return []
        if started:
            self._started.add(item_id)
        if kind == "command_execution":
            return [progress("command", "shell")]
        if kind == "file_change":
            changes = item.get("changes") or [{}]
            return [progress("edit", "file_change") for _ in changes]
        if kind == "mcp_tool_call":
            return [progress("tool", str(item.get("tool") or "mcp"))]
        if kind == "web_search":
            return [progress("tool", "web_search")]
        return []

    def _usage(self, counts: dict[str, Any]) -> Event:
        # Each turn reports its own usage; the protocol wants this run's running totals.
        self.input_tokens += as_int(counts.get("input_tokens"))
        self.output_tokens += as_int(counts.get("output_tokens")) + as_int(
            counts.get("reasoning_output_tokens")
        )
        cost = (
            self.input_tokens * float(self.prices.get("input", 0.0))
            + self.output_tokens * float(self.prices.get("output", 0.0))
        ) / 1_000_000
        return usage(self.input_tokens, self.output_tokens, cost)

    def result(self, exit_code: int, *, changed: bool) -> Event:
        if self.failure is not None:
            return failed("Codex could not finish the turn (its model API failed)")
        if exit_code != 0 or not self.completed:
            return failed(f"Codex exited with status {exit_code} before the turn completed")
        question = find_question(self.message)
        if question:
            return asked(question)
        return done(self.message or "Codex finished.")
