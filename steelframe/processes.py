"""`steelframe serve --processes N`: N serve processes on one port, one event loop each.

Each child is an ordinary `serve --reuse-port`: with SO_REUSEPORT the kernel spreads new
connections over the processes' listening sockets. The parent binds the port first (without
listening), so port 0 resolves to one free port that all children share, and the port stays
reserved while children restart. Everything the processes share (turn slots, stop signals,
frames for resume, the events stream, delivery claims) already goes through the database and
Redis, exactly as for several instances behind a load balancer; so N > 1 needs Redis.

The parent forwards SIGINT/SIGTERM to every child and waits for them; a child that dies is
started again, unless it keeps dying at start, which stops the whole group. Children start
with both signals blocked, which each unblocks once it holds them (`bot.stop_request`): a
stop forwarded while a child is still starting ends it cleanly after its current step.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from bot.config import Settings
from bot.stop_request import StopRequest, stop_signals_blocked
from steelframe.listening import say_listening

# A child that exits within this long after it started counts as failing at start.
QUICK_EXIT_SECONDS = 5.0
MAX_QUICK_EXITS = 3
# A stopping child may take STEELFRAME_SHUTDOWN_GRACE_SECONDS for its watched chat turns,
# then up to this to end the rest and relay their end (bot.chat.inflight.CUT_SECONDS and the
# relay's last write): killed sooner, its turns would end with no frame saying so.
CHILD_STOP_MARGIN_SECONDS = 15.0


def reserve_port(host: str, port: int) -> socket.socket:
    """A bound, non-listening SO_REUSEPORT socket: resolves port 0 and holds the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    reserved = socket.socket(family, socket.SOCK_STREAM)
    reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    reserved.bind((host, port))
    return reserved


def child_command(host: str, port: int, slot: int, *, loop: str = "auto") -> list[str]:
    """One child's command line; only the first holds the webhook relay open (one relay
    client per service, or every delivery would arrive once per process)."""
    command = [sys.executable, "-m", "steelframe.cli", "serve", "--reuse-port"]
    command += ["--host", host, "--port", str(port), "--processes", "1", "--loop", loop]
    return command if slot == 0 else [*command, "--no-relay"]


def run_processes(
    args: argparse.Namespace,
    settings: Settings,
    host: str,
    port: int,
    *,
    as_records: bool = False,
    say: Callable[[str], None] = print,
    tell: Callable[[str], None] | None = None,
    stop_request: StopRequest | None = None,
) -> int:
    """What the group does is said as lines, or with `as_records` as JSON records: `say`
    for progress, `tell` for a child's death (the command's Narrator). A start-up failure
    stays one plain line on standard error, as every command's does."""
    if not settings.redis_url:
        print(
            "steelframe: --processes needs Redis (STEELFRAME_REDIS_URL): the processes share "
            "turn slots, stop signals and the events stream through it",
            file=sys.stderr,
        )
        return 2
    try:
        reserved = reserve_port(host, port)
    except OSError as exc:
        print(f"steelframe: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return 2
    port = reserved.getsockname()[1]
    url = f"http://{host}:{port}"
    say_listening(url, as_record=as_records, processes=str(args.processes))
    say(f"serve: {args.processes} processes sharing port {port}")
    with reserved:
        command = functools.partial(child_command, host, port, loop=args.loop)
        stop_seconds = settings.shutdown_grace_seconds + CHILD_STOP_MARGIN_SECONDS
        supervisor = Supervisor(command, args.processes, stop_seconds=stop_seconds, tell=tell)
        code = supervisor.run(stop_request)
        if stop_request is not None and supervisor.stopped_before_start:
            say(f"{stop_request.signal_name} while starting; stopped")
        return code


class Supervisor:
    def __init__(
        self,
        command: Callable[[int], list[str]],
        count: int,
        *,
        stop_seconds: float = 15.0,
        tell: Callable[[str], None] | None = None,
    ) -> None:
        self.command = command
        self.count = count
        self.stop_seconds = stop_seconds  # a child still running this long after a stop is killed
        self.children: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
        self.stopping = False
        self.quick_exits = 0
        self.stopped_before_start = False  # a stop came before any child was started
        # Where a child's death is said (`serve: process ... exited`): a line, or a record.
        self.tell = tell or _to_stderr

    def run(self, stop_request: StopRequest | None = None) -> int:
        """`stop_request`: a stop signalled before this took the signals starts no child."""
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            if stop_request is not None and stop_request.requested:
                self.stopped_before_start = True
                return 0
            for slot in range(self.count):
                self._start(slot)
            return self._watch()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._terminate_all(self.stop_seconds)

    def _start(self, slot: int) -> None:
        # A stop arriving meanwhile is handled once the child is in `children` to forward to.
        with stop_signals_blocked():
            self.children[slot] = (subprocess.Popen(self.command(slot)), time.monotonic())

    def _watch(self) -> int:
        while not self.stopping:
            for slot, (child, started) in list(self.children.items()):
                code = child.poll()
                if code is None or self.stopping:
                    continue
                quick = time.monotonic() - started < QUICK_EXIT_SECONDS
                self.quick_exits = self.quick_exits + 1 if quick else 0
                self.tell(f"process {child.pid} exited ({code})")
                if self.quick_exits >= MAX_QUICK_EXITS:
                    self.tell("processes keep failing at start; stopping")
                    return 1
                self._start(slot)
            time.sleep(0.2)
        return 0

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True
        for child, _ in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    def _terminate_all(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        for child, _ in self.children.values():
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.terminate()
        for child, _ in self.children.values():
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _to_stderr(text: str) -> None:
    print(f"serve: {text}", file=sys.stderr, flush=True)
