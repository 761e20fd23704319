"""The settings `steelframe dev` runs on, derived from the configured ones: what dev uses
(`steelframe/dev.py`) and what `steelframe config --dev` shows, from one derivation. Light
on purpose: `config` imports it, and no database driver or web framework.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import DEFAULT_DATA_DIR, DEFAULT_DATABASE_FILE, Settings

# What dev keeps to itself unless told otherwise: a shell configured for production must
# not have dev create operators in, or run tasks against, its database and Redis.
OWN_SERVICES = {
    "data_dir": "STEELFRAME_DATA_DIR",
    "database_url": "STEELFRAME_DATABASE_URL",
    "redis_url": "STEELFRAME_REDIS_URL",
}
TOKEN_FILE = "dev-token"
# Held (flock) by the `dev` running on a data folder, with its pid: a second one there would
# share its SQLite file and overwrite its sandbox's state and its Redis's pid file.
LOCK_FILE = "dev.lock"
# What dev starts itself when the settings name none: the variables each one sets.
SANDBOX_VARIABLES = ("APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET", "GITHUB_API_URL")
DEV = "steelframe dev"  # the source of a value dev chose


@dataclass(frozen=True)
class DevPlan:
    """Dev's settings before it starts anything, the configured variables it does not use,
    and the variables it sets once it has started their service (variable -> what)."""

    settings: Settings
    ignored: list[str]
    started: dict[str, str]


def plan_dev(
    settings: Settings, *, data_dir: Path | None, use_configured_services: bool
) -> DevPlan:
    """What `steelframe dev [--data-dir DIR] [--use-configured-services]` runs on."""
    ignored: list[str] = []
    if use_configured_services:
        if data_dir is not None:
            settings = dataclasses.replace(settings, data_dir=data_dir.resolve())
    else:
        settings, ignored = own_services(settings, data_dir)
    settings = dev_settings(settings)
    started: dict[str, str] = {}
    if not settings.redis_url:
        started["STEELFRAME_REDIS_URL"] = f"an embedded Redis in {settings.data_dir / 'redis'}"
    if not settings.github_configured:
        sandbox = f"the local GitHub sandbox in {settings.data_dir / 'github-sandbox'}"
        started.update(dict.fromkeys(SANDBOX_VARIABLES, sandbox))
        if sandbox_write_interval(settings) == 0.0:
            settings = _by_dev(settings, github_write_interval=0.0)
    return DevPlan(settings, ignored, started)


def own_services(settings: Settings, data_dir: Path | None) -> tuple[Settings, list[str]]:
    """Dev's own data folder, SQLite database and (embedded) Redis, and the names of the
    configured settings this replaced."""
    configured = [env for attr, env in OWN_SERVICES.items() if _configured(settings, attr)]
    folder = (data_dir or DEFAULT_DATA_DIR).expanduser().resolve()
    own = _by_dev(
        settings,
        data_dir=folder,
        database_url=f"sqlite:///{folder / DEFAULT_DATABASE_FILE}",
        redis_url=None,
    )
    return own, configured


def _configured(settings: Settings, attr: str) -> bool:
    """Whether a file or the environment set `attr` (not a default, not emptied)."""
    source = settings.sources.get(attr, "default")
    return source not in ("default", "dev default", DEV) and not source.endswith("(empty: unset)")


def dev_settings(settings: Settings) -> Settings:
    """The embedded defaults that depend on what else is set: the demo coding runtime unless
    a real one is configured, and an absolute data directory (the worker and the coding
    runtime run in other directories)."""
    settings = dataclasses.replace(settings, data_dir=settings.data_dir.resolve())
    if settings.coding_agent is None and not settings.coding_command:
        return _by_dev(settings, coding_agent="demo")
    return settings


def sandbox_write_interval(settings: Settings) -> float:
    """GitHub's 1 s between writes protects github.com, not a local sandbox: paced, a
    filing took 7 s and Publish to PR 9 s (bench/dev_loop.py, bench/README.md). An
    interval set on purpose (STEELFRAME_GITHUB_WRITE_INTERVAL) still applies."""
    if settings.sources.get("github_write_interval") in (".env", "environment"):
        return settings.github_write_interval
    return 0.0


def _by_dev(settings: Settings, **changes: Any) -> Settings:
    """`settings` with `changes`, each one's source said to be dev (`config --dev`)."""
    sources = {**settings.sources, **dict.fromkeys(changes, DEV)}
    return dataclasses.replace(settings, **changes, sources=sources)


def running_dev(folder: Path) -> str | None:
    """The pid of the `dev` holding `folder`'s lock, if one runs there ("?" if it wrote
    none yet); None when none does. Makes nothing: a folder never used has no lock file."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError, PermissionError):
        with (folder / LOCK_FILE).open() as lock:
            try:
                # Shared and let go at once: a `dev` that starts in that instant tries again
                # (dev.hold_data_dir), and finds the folder free.
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return lock.read().strip() or "?"
            fcntl.flock(lock, fcntl.LOCK_UN)
    return None
