"""`steelframe worker` as a real process for tests: its environment and its start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from bot.config import Settings
from tests.fakes.lifecycle import Lifecycle

CREDENTIAL_VARS = ("STEELFRAME_", "APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")


def worker_env(lc: Lifecycle) -> dict[str, str]:
    """The environment `steelframe worker` needs to reach the test's database, Redis and
    sandbox App (everything the in-process bench has in its settings)."""
    return settings_env(lc.settings)


def settings_env(s: Settings) -> dict[str, str]:
    """`s` as the environment of a `steelframe` child process (worker or serve) that reaches
    the test's database, Redis and sandbox App."""
    assert s.private_key is not None and s.redis_url is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(CREDENTIAL_VARS)}
    env.update(
        {
            "STEELFRAME_DATABASE_URL": s.database_url,
            "STEELFRAME_REDIS_URL": s.redis_url,
            "STEELFRAME_DATA_DIR": str(s.data_dir),
            "STEELFRAME_CHECKOUT": str(s.checkout),
            "APP_ID": str(s.app_id),
            "PRIVATE_KEY": s.private_key.reveal(),
            "WEBHOOK_SECRET": s.webhook_secret.reveal() if s.webhook_secret else "",
            "STEELFRAME_REPO": s.repo,
            "GITHUB_API_URL": s.github_api_url,
            "STEELFRAME_GITHUB_WRITE_INTERVAL": "0",
            "STEELFRAME_CODING_COMMAND": s.coding_command or "",
            "STEELFRAME_TASK_LEASE_SECONDS": str(s.task_lease_seconds),
            "STEELFRAME_TASK_RETRY_BACKOFF_SECONDS": "0",
            "STEELFRAME_REVIEW_GATHER_SECONDS": str(s.review_gather_seconds),
            "STEELFRAME_TASK_MAX_ATTEMPTS": str(s.task_max_attempts),
            "STEELFRAME_LOG_LEVEL": "INFO",
            "STEELFRAME_CODING_SANDBOX": s.coding_sandbox,
            "STEELFRAME_CODING_NETWORK": str(s.coding_network).lower(),
            "STEELFRAME_EGRESS_PRIVATE": ",".join(s.egress_private),
            "STEELFRAME_CODING_READ_ONLY_PATHS": os.pathsep.join(
                map(str, s.coding_read_only_paths)
            ),
            "STEELFRAME_CODING_WRITABLE_PATHS": os.pathsep.join(map(str, s.coding_writable_paths)),
        }
    )
    return env


def start_worker(
    lc: Lifecycle, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`steelframe worker ARGS` on the test's own queue (`lc.ctx.queue_name`), in a session
    of its own, its output in `log`; `env` is laid over `worker_env(lc)`."""
    return spawn_worker(lc.settings, log, "--queue", lc.ctx.queue_name, *args, env=env)


def spawn_worker(
    settings: Settings, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`steelframe worker ARGS` for `settings`, in a session of its own, output in `log`;
    `env` is laid over `settings_env(settings)`."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "steelframe.cli", "worker", *args],
            env={**settings_env(settings), **(env or {})},
            cwd=settings.data_dir.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def stop_processes(
    processes: Iterable[subprocess.Popen[bytes]], *, within: float = 30
) -> None:
    """Stop process groups started in sessions of their own: SIGTERM (a worker finishes its
    job), then SIGKILL for any still there after `within` seconds, so a teardown never
    hangs on a stuck one nor hides the failure that brought the test here."""
    processes = list(processes)
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)  # a frozen group cannot act on SIGTERM
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            await asyncio.to_thread(process.wait, within)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.to_thread(process.wait)
