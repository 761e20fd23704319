"""The coding runtime: a command that gets a prompt and changes the working tree.

The protocol (docs/lifecycle.md, "The coding command"):

* It runs in the sandbox (`bot.lifecycle.sandbox`): its copy of the repository at
  `/workspace` (a branch `steelframe/issue-N`), a private `/tmp`, a read-only system, an
  allowlisted environment; in a process group of its own, with the prompt on stdin (also at
  `$STEELFRAME_PROMPT_FILE`).
* It writes JSON lines to stdout: `{"type": "session", "session_id", "transcript"}` as soon
  as it has a session (stored at once, so a continuation resumes it even after a crash),
  `{"type": "usage", "input_tokens", "output_tokens", "cost_usd"}` with running totals,
  `{"type": "log", "text"}`, `{"type": "progress", "action": "command" | "edit" | "tool",
  "name"}` for each step the agent takes, and last `{"type": "result", "status": "done" |
  "question" | "error", "summary", "question", "error", "limit"}`, read as the Structs of
  bot/contracts/coding_protocol.py (`bot.lifecycle.coding_lines`). Other lines are kept as
  log text; a protocol line in another shape is too, with a line naming the key.
* Exit status 0 with a result line is an answer; anything else is an error.
* It never pushes: the worker commits what it left, pushes and opens the pull request.

Everything it prints goes to the run's private log (redacted by the caller); what reaches
the public is only what the worker says about it (`error` below is in the worker's words,
`reason` is the short reason the runtime declared in its result line).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from msgspec import UnsetType

from bot.contracts.coding_protocol import (
    AgentEvent,
    Log,
    Progress,
    Result,
    Session,
    Usage,
)
from bot.lifecycle.coding_lines import Malformed, read_line
from bot.lifecycle.egress import running_egress
from bot.lifecycle.egress_blocked import BlockedHost
from bot.lifecycle.run_cgroup import RunCgroup
from bot.lifecycle.sandbox import Launch, SandboxPolicy, SandboxRun, wrap
from bot.lifecycle.sandbox_spawn import Spawned, spawn

log = logging.getLogger(__name__)

# Time a runtime gets between SIGTERM and SIGKILL when it must stop.
KILL_GRACE_SECONDS = 2.0
LOG_TAIL_LINES = 60
MAX_LINE_BYTES = 1 << 20
# The private log keeps this much of what the runtime printed (the rest is counted).
MAX_LOG_CHARS = 2_000_000
MAX_LOG_LINE = 4000
# A session is stored (the task row and an event) when it changes, at most this many times
# a run: a runtime printing session lines in a loop wrote a row per line into the shared
# database for as long as it ran. Its transcript is cut to what a continuation's
# environment carries (`STEELFRAME_RESUME_TRANSCRIPT`; the kernel takes 128 KiB a value).
MAX_SESSION_UPDATES = 10
MAX_TRANSCRIPT_CHARS = 64 * 1024


class CodingStatus(StrEnum):
    DONE = "done"
    QUESTION = "question"
    ERROR = "error"
    TIMED_OUT = "timed_out"
    LIMIT = "limit"
    STOPPED = "stopped"


@dataclass(frozen=True)
class CodingRequest:
    """A coding run: `task_env` is what the task adds to the runtime's environment;
    `base_env` the worker's environment (`WorkerEnvironment.variables`, read at its start),
    of which the sandbox passes PATH, the locale and the operator's named variables
    (`sandbox.allowed_env`). Without it (a check of the host, a test) the sandbox reads
    this process's environment."""

    command: Sequence[str]
    run: SandboxRun
    prompt: str
    time_limit: float
    task_env: Mapping[str, str]
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    base_env: Mapping[str, str] | None = None


class RunLog:
    """Everything the runtime printed, in order, with its stream; bounded."""

    def __init__(self, limit: int = MAX_LOG_CHARS) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.dropped = 0
        self.limit = limit

    def add(self, stream: str, text: str) -> None:
        line = f"[{stream}] {text[:MAX_LOG_LINE]}"
        if self.size + len(line) > self.limit:
            self.dropped += 1
            return
        self.lines.append(line)
        self.size += len(line) + 1

    def text(self) -> str:
        more = f"\n[worker] {self.dropped} more lines not kept" if self.dropped else ""
        return "\n".join(self.lines) + more


@dataclass
class CodingOutcome:
    status: CodingStatus
    summary: str = ""
    question: str = ""
    error: str = ""  # in the worker's words
    reason: str = ""  # what the runtime declared in its result line (untrusted)
    limit: str = ""
    session_id: str | None = None
    transcript: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    exit_code: int | None = None
    seconds: float = 0.0
    log_tail: list[str] = field(default_factory=list)
    log: RunLog = field(default_factory=RunLog)
    sandboxed: bool = False
    # Requests the run's egress proxy refused, once per host.
    blocked: list[BlockedHost] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


SessionHook = Callable[[str | None, str | None], Awaitable[None]]
# Called with each step the agent reports: ("command" | "edit" | "tool", tool name).
ProgressHook = Callable[[str, str], None]
# Returns the name of the limit the running totals exceed, or None.
UsageHook = Callable[[int, float], str | None]
StartHook = Callable[[int], Awaitable[None]]


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


def _fold(outcome: CodingOutcome, event: AgentEvent) -> None:
    """Fold one protocol line into the outcome."""
    if isinstance(event, Session):
        transcript = event.transcript if isinstance(event.transcript, str) else None
        outcome.session_id = event.session_id or outcome.session_id
        outcome.transcript = transcript or outcome.transcript
    elif isinstance(event, Usage):
        outcome.input_tokens = event.input_tokens
        outcome.output_tokens = event.output_tokens
        outcome.cost_usd = event.cost_usd
    elif isinstance(event, Log):
        outcome.log_tail.append(event.text[:500])
    elif isinstance(event, Result):
        _fold_result(outcome, event)


def _fold_result(outcome: CodingOutcome, result: Result) -> None:
    """The outcome a result line says, all of it: a later result line replaces what an
    earlier one said (its error and limit too), as the protocol's last line is the answer."""
    outcome.summary = _text(result.summary)
    outcome.question = _text(result.question)
    outcome.reason = _text(result.error)
    outcome.error = ""
    outcome.limit = ""
    if result.status == "done":
        outcome.status = CodingStatus.DONE
    elif result.status == "question" and outcome.question.strip():
        outcome.status = CodingStatus.QUESTION
    elif result.status == "question":
        outcome.status = CodingStatus.ERROR
        outcome.error = "the runtime asked a question but sent no question text"
    elif isinstance(result.limit, str):  # an AgentLimit: the decoder refused other words
        outcome.status = CodingStatus.LIMIT
        outcome.limit = result.limit
    else:
        outcome.status = CodingStatus.ERROR
        outcome.error = "the coding runtime gave up"


def _text(value: str | UnsetType) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class _Reading:
    """What reading stdout found that decides the run's end."""

    saw_result: bool = False
    malformed_result: Malformed | None = None  # the last, when no result line was read

    def missing_answer(self) -> str | None:
        """Why the run gave no answer, in the worker's words; None when it gave one."""
        if self.saw_result:
            return None
        if self.malformed_result is not None:
            return (
                f"the coding command's result line was malformed ({self.malformed_result.problem})"
            )
        return "the coding command exited without a result line"


async def _lines(stream: asyncio.StreamReader, on_cut: Callable[[], None]) -> AsyncIterator[bytes]:
    """Each line of `stream`; one past the stream's limit (MAX_LINE_BYTES) comes cut there,
    the rest of it dropped. `async for` over the stream raised instead, and the reading
    stopped: the result line after an overlong one was lost, and a runtime that went on
    writing could block on the pipe no one read."""
    dropping = False  # the rest of a line already cut
    while True:
        try:
            line = await stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            if end.partial and not dropping:
                yield end.partial
            return
        except asyncio.LimitOverrunError as long:
            piece = await stream.readexactly(long.consumed)
            if not dropping:
                on_cut()
                yield piece[:MAX_LINE_BYTES]
            dropping = True
            continue
        if not dropping:
            yield line
        dropping = False


async def _spawn(launch: Launch, policy: SandboxPolicy) -> Spawned:
    return await spawn(  # in a cgroup of its own where the host allows: the whole run's limits
        launch,
        policy,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=MAX_LINE_BYTES,
    )


async def _out_of_memory(group: RunCgroup) -> bool:
    await group.ended()
    return group.memory_exhausted


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
    """Run the command to its result, its time limit, a limit on usage, or `stop`.

    Raises `SandboxUnavailable` before starting anything if the sandbox cannot run."""
    hooks = (on_session, on_usage, on_progress)
    request.run.prompt.write_text(request.prompt)
    launch = wrap(
        request.policy, request.run, request.command, request.task_env, base_env=request.base_env
    )
    outcome = CodingOutcome(status=CodingStatus.ERROR, sandboxed=launch.sandboxed)
    async with running_egress(launch) as blocked:
        await _run_launched(launch, request, outcome, stop, on_start, hooks, grace)
    outcome.blocked = blocked.hosts()
    return outcome


async def _run_launched(
    launch: Launch,
    request: CodingRequest,
    outcome: CodingOutcome,
    stop: asyncio.Event,
    on_start: StartHook,
    hooks: tuple[SessionHook, UsageHook, ProgressHook | None],
    grace: float,
) -> None:
    started = time.monotonic()
    try:
        spawned = await _spawn(launch, request.policy)
    except OSError as exc:
        outcome.error = "the coding command could not be started"
        outcome.log.add("worker", f"could not start the coding command: {exc.strerror or exc}")
        return
    process, group = spawned.process, spawned.group
    outcome.log.add("worker", spawned.note)  # which uid, and what its process limit counts
    await on_start(process.pid)
    ended_by, reading = await _supervise(process, request, outcome, stop, hooks, grace)
    outcome.seconds = time.monotonic() - started
    outcome.exit_code = process.returncode
    if ended_by is not None:
        outcome.status = ended_by
        if ended_by == CodingStatus.TIMED_OUT:
            outcome.limit = "time"
    elif group is not None and await _out_of_memory(group):
        # The kernel's kill reads as "status -9"; the operator needs to know it was memory.
        outcome.status = CodingStatus.ERROR
        outcome.error = (
            f"the coding run went over its memory limit ({request.policy.memory_mb} MB, "
            "STEELFRAME_CODING_MEMORY_MB) and was stopped"
        )
    elif process.returncode != 0:
        outcome.status = CodingStatus.ERROR
        outcome.error = f"the coding command exited with status {process.returncode}"
    elif (missing := reading.missing_answer()) is not None:
        outcome.status = CodingStatus.ERROR
        outcome.error = missing
    await spawned.ended()  # its uid let go: the next run may be given it


# Long: the three readers are closures over the outcome and `ended_by`, which the wait
# loop below races; apart, that shared state would have to be passed around.
async def _supervise(
    process: asyncio.subprocess.Process,
    request: CodingRequest,
    outcome: CodingOutcome,
    stop: asyncio.Event,
    hooks: tuple[SessionHook, UsageHook, ProgressHook | None],
    grace: float,
) -> tuple[CodingStatus | None, _Reading]:
    """Feed the prompt, read both streams into the log, and wait for the end."""
    on_session, on_usage, on_progress = hooks
    reading = _Reading()
    ended_by: CodingStatus | None = None
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(request.prompt.encode())
            await process.stdin.drain()
            process.stdin.close()

    stored_session: tuple[str | None, str | None] = (None, None)
    session_changes = 0

    async def store_session() -> None:
        """The session as it is now, when it changed, while the run may store it again."""
        nonlocal stored_session, session_changes
        now = (outcome.session_id, outcome.transcript)
        if now == stored_session:
            return
        session_changes += 1
        if session_changes > MAX_SESSION_UPDATES:
            if session_changes == MAX_SESSION_UPDATES + 1:
                outcome.log.add("worker", "the session changed too often: no longer stored")
            return
        stored_session = now
        await on_session(*now)

    def cut(stream: str) -> None:
        outcome.log.add("worker", f"a line on {stream} went past {MAX_LINE_BYTES} bytes: cut")

    async def read_stderr() -> None:
        assert process.stderr is not None
        async for raw in _lines(process.stderr, lambda: cut("stderr")):
            line = raw.decode(errors="replace").rstrip()
            outcome.log.add("stderr", line)
            tail.append(line[:500])

    async def read_stdout() -> None:
        nonlocal ended_by
        assert process.stdout is not None
        async for raw in _lines(process.stdout, lambda: cut("stdout")):
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            outcome.log.add("stdout", line)
            event = read_line(line)
            if event is None:  # not a protocol line: log text
                tail.append(line[:500])
                continue
            if isinstance(event, Malformed):  # said, then passed over as an unknown line
                outcome.log.add("worker", event.note())
                tail.append(event.note())
                if event.kind == "result":
                    reading.malformed_result = event
                continue
            _fold(outcome, event)
            if isinstance(event, Session):
                await store_session()
            elif isinstance(event, Usage):
                exceeded = on_usage(outcome.tokens, outcome.cost_usd)
                if exceeded:
                    outcome.limit = exceeded
                    ended_by = CodingStatus.LIMIT
                    return
            elif isinstance(event, Progress) and on_progress is not None:
                on_progress(event.action, event.name[:40])
            elif isinstance(event, Result):
                reading.saw_result = True

    feeder = asyncio.ensure_future(feed())
    out_reader = asyncio.ensure_future(read_stdout())
    err_reader = asyncio.ensure_future(read_stderr())
    stopper = asyncio.ensure_future(stop.wait())
    waiter = asyncio.ensure_future(process.wait())
    deadline = time.monotonic() + max(request.time_limit, 0.0)
    try:
        while ended_by is None:
            if waiter.done():
                # Exited: let the readers drain what is buffered (a child the runtime left
                # behind may hold the pipes open, so only briefly).
                await asyncio.wait({out_reader, err_reader}, timeout=grace)
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
    outcome.log_tail = [*outcome.log_tail, *tail][-LOG_TAIL_LINES:]
    return ended_by, reading
