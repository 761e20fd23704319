"""aider (`aider --message-file ...`): the command line and the plain-text parser
(../shared/agents/coding-agents.md, section 3; version 0.86).

aider has no machine-readable output and exits 0 whatever happened (1 only for start-up
errors), so the outcome comes from the working tree (changed or not) and its output lines:
`Applied edit to PATH`, the error strings below, and the usage line
`Tokens: 2.1k sent, 120 received. Cost: $0.0081 message, $0.0081 session.`
It never commits (`--no-auto-commits --no-dirty-commits`): the worker does.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from bot.contracts.coding_protocol import AgentEvent, Result
from bot.lifecycle.agents.base import (
    AgentRun,
    Launch,
    asked,
    done,
    failed,
    find_question,
    log,
    progress,
    usage,
)

BINARY = "aider"
APPLIED = re.compile(r"^Applied edit to (?P<path>.+)$")
# The usage line; cache write/hit parts appear between "sent" and "received" when used.
TOKENS = re.compile(r"^Tokens: (?P<sent>[\d.,]+[kKmM]?) sent\b")
RECEIVED = re.compile(r"(?P<received>[\d.,]+[kKmM]?) received\.")
SESSION_COST = re.compile(r"\$(?P<cost>[\d.,]+) session\.")
# Output that means the model's work did not land (base_coder.py, repo.py).
ERRORS = (
    "The LLM did not conform to the edit format.",
    "Only 3 reflections allowed, stopping.",
    "Empty response received from LLM.",
    "Unable to commit:",
    "Exception while updating files:",
)
# aider's own files, kept out of the checkout (and out of the diff).
HISTORY_FILES = (".aider.chat.history.md", ".aider.input.history")
# litellm (inside aider) downloads its price list from raw.githubusercontent.com at import
# unless told to use the copy it ships: the run's egress proxy refuses that host. aider's own
# copy of the list has no switch: the adapter seeds its cache (adapter.seed_aider_prices).
QUIET_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def launch(run: AgentRun, scratch: Path) -> Launch:
    """`scratch` is a private directory outside the checkout for the message and history."""
    message = scratch / "message.md"
    message.write_text(run.prompt)
    argv = [BINARY, "--message-file", str(message)]
    argv += ["--yes-always", "--no-auto-commits", "--no-dirty-commits"]
    argv += ["--no-pretty", "--no-stream", "--no-check-update", "--no-show-release-notes"]
    argv += ["--analytics-disable", "--no-gitignore", "--no-fancy-input"]
    argv += ["--chat-history-file", str(scratch / HISTORY_FILES[0])]
    argv += ["--input-history-file", str(scratch / HISTORY_FILES[1])]
    if run.model:
        argv += ["--model", run.model]
    return Launch(argv=tuple(argv), stdin=None, env=QUIET_ENV)


def remove_caches(checkout: Path) -> None:
    """aider leaves its repository-map cache (`.aider.tags.cache.v4/`) in the checkout's root,
    which has no place in a pull request (the next run builds it again)."""
    for cache in checkout.glob(".aider.tags.cache.v*"):
        if cache.is_dir() and not cache.is_symlink():
            shutil.rmtree(cache, ignore_errors=True)


def _count(text: str) -> int:
    text = text.replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        return int(float(number) * scale)
    except ValueError:
        return 0


class AiderParser:
    def __init__(self) -> None:
        self.applied: list[str] = []
        self.errors: list[str] = []
        self.lines: list[str] = []
        self.input_tokens = 0
        self.output_tokens = 0

    def feed(self, line: str) -> list[AgentEvent]:
        text = line.rstrip()
        self.lines.append(text)
        del self.lines[:-400]
        if found := APPLIED.match(text):
            self.applied.append(found.group("path"))
            return [progress("edit", "aider")]
        if found := TOKENS.match(text):
            received = RECEIVED.search(text)
            cost = SESSION_COST.search(text)
            self.input_tokens += _count(found.group("sent"))
            self.output_tokens += _count(received.group("received")) if received else 0
            # The session figure is already this run's running total.
            spent = float(cost.group("cost").replace(",", "")) if cost else 0.0
            return [usage(self.input_tokens, self.output_tokens, spent)]
        if any(text.startswith(error) for error in ERRORS):
            self.errors.append(text)
            return [log(f"aider: {text}")]
        return []

    def result(self, exit_code: int, *, changed: bool) -> Result:
        if exit_code != 0:
            return failed(f"aider could not start (exit status {exit_code})")
        question = find_question("\n".join(self.lines))
        if question and not changed:
            return asked(question)
        if changed:
            files = len(set(self.applied))
            return done(f"aider applied edits to {files} file{'s' if files != 1 else ''}.")
        if self.errors:
            return failed(f"aider changed nothing: {self.errors[-1]}")
        return done("aider finished without changing any file.")
