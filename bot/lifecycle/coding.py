"""The coding runtime: a command that gets a prompt and changes the working tree.

The protocol (docs/lifecycle.md, "The coding command"):

* It runs in the task's worktree (a branch `steelframe/issue-N`), in a process group of its
  own, with the prompt on stdin (also at `$STEELFRAME_PROMPT_FILE`) and the worker's
  environment minus every GitHub credential and Steelframe setting.
* It writes JSON lines to stdout: `{"type": "session", "session_id", "transcript"}` as soon
  as it has a session (stored at once, so a continuation resumes it even after a crash),
  `{"type": "usage", "input_tokens", "output_tokens", "cost_usd"}` with running totals,
  `{"type": "log", "text"}`, `{"type": "progress", "action": "command" | "edit" | "tool",
  "name"}` for each step the agent takes, and last `{"type": "result", "status": "done" |
  "question" | "error", "summary", "question", "error", "limit"}`. Other lines are kept as
  log text.
* Exit status 0 with a result line is an answer; anything else is an error.
* It never pushes: the worker commits what it left, pushes and opens the pull request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Time a runtime gets between SIGTERM and SIGKILL when it must stop.
KILL_GRACE_SECONDS = 2.0
LOG_TAIL_LINES = 60
MAX_LINE_BYTES = 1 << 20
# Never handed to the coding runtime: the App's credentials, tokens that could write to
# GitHub, and Steelframe's own settings (database and Redis URLs can carry passwords).
SECRET_NAMES = frozenset(
    {
        "APP_ID",
        "PRIVATE_KEY",
        "PRIVATE_KEY_PATH",
        "WEBHOOK_SECRET",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_API_URL",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
    }
)
SECRET_PREFIXES = ("STEELFRAME_", "GIT_CONFIG", "GITHUB_APP_", "RQ_")


class CodingStatus(StrEnum):
    DONE = "done"
    QUESTION = "question"
    ERROR = "error"
    TIMED_OUT = "timed_out"
    LIMIT = "limit"
    STOPPED = "stopped"


@dataclass(frozen=True)
class CodingRequest:
    command: Sequence[str]
    cwd: Path
    prompt: str
    prompt_file: Path
    time_limit: float
    task_env: Mapping[str, str]


@dataclass
class CodingOutcome:
    status: CodingStatus
    summary: str = ""
    question: str = ""
    error: str = ""
    limit: str = ""
    session_id: str | None = None
    transcript: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    exit_code: int | None = None
    seconds: float = 0.0
    log_tail: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


SessionHook = Callable[[str | None, str | None], Awaitable[None]]
# Called with each step the agent reports: ("command" | "edit" | "tool", tool name).
ProgressHook = Callable[[str, str], None]
PROGRESS_ACTIONS = frozenset({"command", "edit", "tool"})
# An agent's own limits that end a run as a limit (not retried), by the name the task uses.
AGENT_LIMITS = frozenset({"turns", "cost", "tokens", "time"})
# Returns the name of the limit the running totals exceed, or None.
UsageHook = Callable[[int, float], str | None]
StartHook = Callable[[int], Awaitable[None]]


def runtime_env(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        name: value
        for name, value in base.items()
        if name not in SECRET_NAMES and not name.startswith(SECRET_PREFIXES)
    }
    env.update(extra)
    return env


def kill_group(pgid: int, sig: signal.Signals = signal.SIGKILL) -> bool:
    """Signal a whole process group; False when it is already gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        log.warning("coding: not allowed to signal process group %s", pgid)
        return False


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def _stop(process: asyncio.subprocess.Process, grace: float) -> None:
    kill_group(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        pass
    # Children the runtime left behind share its group: take them all down.
    kill_group(process.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), grace)


def _apply_event(outcome: CodingOutcome, event: dict[str, Any]) -> str | None:
    """Fold one protocol event into the outcome; returns "session" or "usage" when seen."""
    kind = event.get("type")
    if kind == "session":
        session_id = event.get("session_id")
        transcript = event.get("transcript")
        outcome.session_id = str(session_id) if session_id else outcome.session_id
        outcome.transcript = str(transcript) if transcript else outcome.transcript
        return "session"
    if kind == "usage":
        outcome.input_tokens = int(event.get("input_tokens") or 0)
        outcome.output_tokens = int(event.get("output_tokens") or 0)
        outcome.cost_usd = float(event.get("cost_usd") or 0.0)
        return "usage"
    if kind == "log":
        outcome.log_tail.append(str(event.get("text", "")))
        return None
    if kind == "progress":
        return "progress" if event.get("action") in PROGRESS_ACTIONS else None
    if kind == "result":
        status = str(event.get("status", ""))
        outcome.summary = str(event.get("summary") or "")
        outcome.question = str(event.get("question") or "")
        outcome.error = str(event.get("error") or "")
        if status == "done":
            outcome.status = CodingStatus.DONE
        elif status == "question" and outcome.question.strip():
            outcome.status = CodingStatus.QUESTION
        elif status == "question":
            outcome.status = CodingStatus.ERROR
            outcome.error = "the runtime asked a question but sent no question text"
        elif status == "error" and event.get("limit") in AGENT_LIMITS:
            outcome.status = CodingStatus.LIMIT
            outcome.limit = str(event["limit"])
        else:
            outcome.status = CodingStatus.ERROR
            outcome.error = outcome.error or f"the runtime reported status {status!r}"
        if event.get("session_id"):
            outcome.session_id = str(event["session_id"])
        return "result"
    outcome.log_tail.append(json.dumps(event)[:500])
    return None


async def run_coding(
    request: CodingRequest,
    *,
    stop: asyncio.Event,
    on_start: StartHook,
    on_session: SessionHook,
    on_usage: UsageHook,
    on_progress: ProgressHook | None = None,
    grace: float = KILL_GRACE_SECONDS,
) -> CodingOutcome:
    """Run the command to its result, its time limit, a limit on usage, or `stop`."""
    request.prompt_file.write_text(request.prompt)
    env = runtime_env(
        os.environ, {**request.task_env, "STEELFRAME_PROMPT_FILE": str(request.prompt_file)}
    )
    started = time.monotonic()
    outcome = CodingOutcome(status=CodingStatus.ERROR)
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    try:
        process = await asyncio.create_subprocess_exec(
            *request.command,
            cwd=request.cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
    except OSError as exc:
        outcome.error = f"could not start the coding command: {exc.strerror or exc}"
        return outcome
    await on_start(process.pid)
    saw_result = False
    ended_by: CodingStatus | None = None

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(request.prompt.encode())
            await process.stdin.drain()
            process.stdin.close()

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for raw in process.stderr:
            tail.append(raw.decode(errors="replace").rstrip()[:500])

    async def read_stdout() -> None:
        nonlocal saw_result, ended_by
        assert process.stdout is not None
        async for raw in process.stdout:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                tail.append(line[:500])
                continue
            if not isinstance(event, dict):
                tail.append(line[:500])
                continue
            seen = _apply_event(outcome, event)
            if seen == "session":
                await on_session(outcome.session_id, outcome.transcript)
            elif seen == "usage":
                exceeded = on_usage(outcome.tokens, outcome.cost_usd)
                if exceeded:
                    outcome.limit = exceeded
                    ended_by = CodingStatus.LIMIT
                    return
            elif seen == "progress" and on_progress is not None:
                on_progress(str(event["action"]), str(event.get("name") or "")[:40])
            elif seen == "result":
                saw_result = True

    feeder = asyncio.ensure_future(feed())
    out_reader = asyncio.ensure_future(read_stdout())
    err_reader = asyncio.ensure_future(read_stderr())
    stopper = asyncio.ensure_future(stop.wait())
    waiter = asyncio.ensure_future(process.wait())
    deadline = started + max(request.time_limit, 0.0)
    try:
        while ended_by is None:
            if waiter.done():
                # Exited: let the reader drain what is buffered (a child the runtime left
                # behind may hold stdout open, so only briefly).
                await asyncio.wait({out_reader}, timeout=grace)
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                ended_by = CodingStatus.TIMED_OUT
                break
            await asyncio.wait(
                {out_reader, stopper, waiter},
                timeout=remaining,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if stopper.done():
                ended_by = CodingStatus.STOPPED
            elif out_reader.done() and not waiter.done() and ended_by is None:
                # stdout closed: the process is exiting; give it the time it has left.
                await asyncio.wait(
                    {waiter, stopper},
                    timeout=max(deadline - time.monotonic(), 0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
    finally:
        if not waiter.done():
            await _stop(process, grace)
        # Children the runtime left behind share its process group.
        kill_group(process.pid, signal.SIGKILL)
        for future in (feeder, out_reader, err_reader, stopper):
            future.cancel()
        await asyncio.gather(feeder, out_reader, err_reader, stopper, return_exceptions=True)
    outcome.seconds = time.monotonic() - started
    outcome.exit_code = process.returncode
    outcome.log_tail = [*outcome.log_tail, *tail][-LOG_TAIL_LINES:]
    if ended_by is not None:
        outcome.status = ended_by
        if ended_by == CodingStatus.TIMED_OUT:
            outcome.limit = "time"
        return outcome
    if process.returncode != 0:
        outcome.status = CodingStatus.ERROR
        last = outcome.error or (tail[-1] if tail else "")
        outcome.error = f"the coding command exited with status {process.returncode}" + (
            f": {last}" if last else ""
        )
    elif not saw_result:
        outcome.status = CodingStatus.ERROR
        outcome.error = "the coding command exited without a result line"
    return outcome
