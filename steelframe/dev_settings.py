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
    folder = own_data_folder(data_dir)
    own = _by_dev(
        settings,
        data_dir=folder,
        database_url=f"sqlite:///{folder / DEFAULT_DATABASE_FILE}",
        redis_url=None,
    )
    return own, configured


def own_data_folder(data_dir: Path | None) -> Path:
    """The folder `steelframe dev [--data-dir DIR]` keeps its own services in; also where
    `steelframe tui --data-dir DIR` and `desktop --data-dir DIR` look for that dev."""
    return (data_dir or DEFAULT_DATA_DIR).expanduser().resolve()


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


@dataclass(frozen=True)
class RunningDev:
    """A `dev` holding a data folder's lock: its pid ("?" before it wrote one) and the URL
    it serves on, None until it has bound its port and settled its token (dev.record_url)."""

    folder: Path
    pid: str
    url: str | None


@dataclass(frozen=True)
class DevClient:
    """What a client needs to reach a running dev: its URL and the dev token it keeps."""

    dev: RunningDev
    url: str
    token: str


def running_dev(folder: Path) -> RunningDev | None:
    """The `dev` holding `folder`'s lock, if one runs there; None when none does (a lock
    file left by one that ended is held by no one). Makes nothing: a folder never used has
    no lock file."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError, PermissionError):
        with (folder / LOCK_FILE).open() as lock:
            try:
                # Shared and let go at once: a `dev` that starts in that instant tries again
                # (dev.hold_data_dir), and finds the folder free.
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return held_by(folder, lock.read())
            fcntl.flock(lock, fcntl.LOCK_UN)
    return None


def held_by(folder: Path, said: str) -> RunningDev:
    """The lock's lines: the pid, then the URL once bound. A line still being written (no
    newline yet) counts as not there."""
    lines = said.split("\n")[:-1]  # complete lines only
    pid = lines[0].strip() if lines and lines[0].strip() else "?"
    url = lines[1].strip() if len(lines) > 1 and lines[1].strip() else None
    return RunningDev(folder, pid, url)


def dev_folders(settings: Settings) -> list[Path]:
    """Where a `dev` started from here would run: the configured data folder (dev's with
    --use-configured-services) and dev's own default one (what `make run` uses)."""
    return list(dict.fromkeys([settings.data_dir.resolve(), DEFAULT_DATA_DIR.resolve()]))


def dev_client(folders: list[Path], *, url: str | None = None) -> DevClient | None:
    """The first dev running on one of `folders` that serves (at `url`, when given), with
    the token it keeps. Only a running dev's token is read: a folder's dev-token outlives
    the dev that wrote it, and another dev on that folder replaces it."""
    for folder in folders:
        dev = running_dev(folder)
        if dev is None or dev.url is None or (url is not None and dev.url != url.rstrip("/")):
            continue
        with contextlib.suppress(OSError):
            token = (folder / TOKEN_FILE).read_text().strip()
            if token:
                return DevClient(dev, dev.url, token)
    return None
