"""`steelframe serve` as a real child process, for tests that kill it, signal it or measure it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from steelframe.listening import announced_url

STEELFRAME = Path(sys.executable).with_name("steelframe")
# Variables of the developer's own environment that must not leak into the child.
PREFIXES = ("STEELFRAME_", "APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")


@dataclass
class Served:
    process: asyncio.subprocess.Process
    url: str
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def child_env(settings: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES)}
    env.update(settings)
    return env


async def wait_ready(url: str, process: asyncio.subprocess.Process, *, within: float) -> None:
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as http:
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"serve exited with {process.returncode}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(f"{url}/healthz") as response:
                    if response.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not answer /healthz in time")
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def serve(
    settings: Mapping[str, str], cwd: Path, log: Path, *, port: int | None = None
) -> AsyncIterator[Served]:
    """`steelframe serve` with `settings` as its environment; stderr goes to `log`. The
    caller may kill it; otherwise it is stopped with SIGTERM at the end. Without `port` it
    binds port 0 and says where (its `url:` line): a port probed free and handed over can be
    taken by another test's process in between, whose /healthz then answers for it."""
    with log.open("ab") as sink:
        process = await asyncio.create_subprocess_exec(
            str(STEELFRAME),
            "serve",
            "--port",
            str(port or 0),
            cwd=cwd,
            env=child_env(settings),
            stdout=asyncio.subprocess.PIPE,
            stderr=sink,
        )
    assert process.stdout is not None
    discard: asyncio.Task[None] | None = None
    try:
        bound = await asyncio.wait_for(_announced_port(process.stdout), 90)
        discard = asyncio.create_task(_discard(process.stdout))
        served = Served(process, f"http://127.0.0.1:{bound}", bound, log)
        await wait_ready(served.url, process, within=90)
        yield served
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
        if discard is not None:
            await discard


async def _announced_port(stdout: asyncio.StreamReader) -> int:
    """The port of the line where serve says its URL once it listens (`url: http://host:port`,
    or a JSON record's `url` with STEELFRAME_LOG_FORMAT=json)."""
    while line := await stdout.readline():
        if (url := announced_url(line)) is not None:
            return int(url.rsplit(":", 1)[1])
    raise RuntimeError("serve exited before it said where it listens")


async def _discard(stdout: asyncio.StreamReader) -> None:
    """Read what serve prints later, so a full pipe never blocks it."""
    while await stdout.read(65536):
        pass


def serve_popen(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """`steelframe serve --port 0 ARGS` on a SQLite database and a data folder in
    `tmp_path`, with `env` on top of this environment (the developer's own settings and
    `LOG_*` left out); its output is piped as text, for a test that reads what it says."""
    settings = {
        "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        **env,
    }
    environ = {k: v for k, v in child_env({}).items() if not k.startswith("LOG_")} | settings
    return subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "serve", "--port", "0", *args],
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a `serve --processes` group's children)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(line) for line in found.stdout.split()]
