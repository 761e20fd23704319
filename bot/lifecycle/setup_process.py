"""One shell command of the repository's (a setup command, the test command) run in the
coding sandbox: its own process group, a time limit, a stop signal, and the tail of what it
printed. The caller decides what the command sees (`SandboxRun`) and redacts the tail.

Where the host allows it the command runs in a cgroup of its own with the run's memory
limit (`bot.lifecycle.run_cgroup`); when that limit stops it, the kernel's kill would read
as a plain failed exit (137), so the result records it (`memory_limit_mb`) and every place
that words a result says it (`ended_by_memory`). Without a cgroup (per-process limits
only) a command that runs out of memory just fails: nothing tells it apart."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass

from bot.lifecycle.coding import kill_group
from bot.lifecycle.egress import running_egress
from bot.lifecycle.egress_blocked import BlockedHost
from bot.lifecycle.run_cgroup import RunCgroup
from bot.lifecycle.sandbox import SandboxPolicy, SandboxRun, wrap
from bot.lifecycle.sandbox_spawn import spawn

SHELL = "/bin/sh"
# What is kept of a command's output (its end, where the failure usually is).
TAIL_BYTES = 16 * 1024
TAIL_LINES = 40
KILL_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int | None  # None: it did not finish (time limit, stopped, not started)
    seconds: float
    tail: str  # the last lines it printed (stdout and stderr), not redacted
    timed_out: bool = False
    stopped: bool = False
    # What its egress proxy refused (recorded on the task by the caller).
    blocked: tuple[BlockedHost, ...] = ()
    # The run's memory limit (MB) when reaching it stopped the command (its cgroup's kill),
    # None otherwise: such a command failed because of the limit, not of itself.
    memory_limit_mb: int | None = None

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and self.memory_limit_mb is None


def ended_by_memory(limit_mb: int) -> str:
    """How a command the run's memory limit stopped ended, for its event, log and PR body."""
    return (
        f"stopped: it reached the run's memory limit ({limit_mb} MB; STEELFRAME_CODING_MEMORY_MB)"
    )


def tail_lines(raw: bytes, lines: int = TAIL_LINES) -> str:
    text = raw.decode(errors="replace").replace("\r", "\n")
    kept = [line.rstrip()[:500] for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


async def run_command(
    policy: SandboxPolicy,
    run: SandboxRun,
    command: str,
    env: Mapping[str, str],
    *,
    time_limit: float,
    stop: asyncio.Event | None = None,
    base_env: Mapping[str, str] | None = None,
) -> CommandResult:
    """`sh -c command` in the sandbox, to its end, its time limit or `stop`. `base_env` is
    the worker's environment (`WorkerEnvironment.variables`, read at its start), of which
    the sandbox passes PATH and the locale (`sandbox.allowed_env`).

    Raises `SandboxUnavailable` (from `wrap`) before starting anything if it cannot run."""
    if not run.prompt.exists():
        run.prompt.write_text("")
    launch = wrap(policy, run, [SHELL, "-c", command], env, base_env=base_env)
    started = time.monotonic()
    # Its own proxy, as the agent's run has: setup reaches the registries, nothing else.
    async with running_egress(launch) as blocked:
        try:  # in a cgroup of its own where the host allows, as a coding run
            spawned = await spawn(
                launch,
                policy,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return CommandResult(command, None, 0.0, f"could not start: {exc.strerror or exc}")
        process, group = spawned.process, spawned.group
        buffer = bytearray()
        ended, stopped = await _wait(process, buffer, time_limit, stop)
    out_of_memory = group is not None and await _out_of_memory(group)
    await spawned.ended()  # its uid let go: the next command may be given it
    return CommandResult(
        command=command,
        exit_code=process.returncode if ended else None,
        seconds=time.monotonic() - started,
        tail=tail_lines(bytes(buffer)),
        timed_out=not ended and not stopped,
        stopped=not ended and stopped,
        blocked=tuple(blocked.hosts()),
        memory_limit_mb=policy.memory_mb if out_of_memory else None,
    )


async def _out_of_memory(group: RunCgroup) -> bool:
    """Whether the group's memory limit killed a process of it (once its watch is over)."""
    await group.ended()
    return group.memory_exhausted


async def _wait(
    process: asyncio.subprocess.Process,
    buffer: bytearray,
    time_limit: float,
    stop: asyncio.Event | None,
) -> tuple[bool, bool]:
    """Read the output's tail into `buffer` until the process ends, its time is up or
    `stop` is set; then its whole group goes. (Whether it ended, whether it was stopped.)"""

    async def read() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            buffer.extend(chunk)
            del buffer[:-TAIL_BYTES]

    reader = asyncio.ensure_future(read())
    waiter = asyncio.ensure_future(process.wait())
    stopper = asyncio.ensure_future(stop.wait() if stop is not None else asyncio.Event().wait())
    try:
        await asyncio.wait({waiter, stopper}, timeout=time_limit, return_when="FIRST_COMPLETED")
    finally:
        ended = waiter.done()
        stopped = stop is not None and stop.is_set()
        if not ended:
            kill_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), KILL_GRACE_SECONDS)
        kill_group(process.pid, signal.SIGKILL)  # what it left running shares its group
        for future in (waiter, reader):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), KILL_GRACE_SECONDS)
        for future in (reader, stopper, waiter):
            future.cancel()
        await asyncio.gather(reader, stopper, waiter, return_exceptions=True)
    return ended, stopped
