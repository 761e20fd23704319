"""One readable line for each infrastructure failure a command meets at start.

A wrong database URL, a database or Redis that does not answer, a port that is taken: each
becomes `steelframe: <what failed>: <why>. Check <setting>.` instead of a traceback. Anything
not recognised here is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno

import redis
from sqlalchemy import exc as sa_exc

from bot.config import Settings

DATABASE_SETTING = "STEELFRAME_DATABASE_URL"
REDIS_SETTING = "STEELFRAME_REDIS_URL"


def explain(exc: BaseException, settings: Settings | None) -> str | None:
    """The one-line message for `exc`, or None when it is not an infrastructure failure."""
    shown = settings.redacted() if settings is not None else {}
    database = shown.get(DATABASE_SETTING, "the configured database")
    if isinstance(exc, sa_exc.NoSuchModuleError | sa_exc.ArgumentError):
        return (
            f"the database URL {database} is not usable ({_first_line(exc)}). "
            f"Check {DATABASE_SETTING} (sqlite:///path or postgresql://user@host/db)."
        )
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
        return (
            f"cannot use the database at {database}: {_first_line(exc.orig or exc)}. "
            f"Check {DATABASE_SETTING} and that the database server is running."
        )
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | redis.AuthenticationError):
        where = shown.get(REDIS_SETTING, "the configured Redis")
        return (
            f"cannot reach Redis at {where}: {_first_line(exc)}. "
            f"Check {REDIS_SETTING} and that redis-server is running."
        )
    folder = _sqlite_folder_problem(exc, settings)
    if folder is not None:
        return (
            f"cannot make the folder {folder} for the SQLite database {database}: "
            f"{exc.strerror if isinstance(exc, OSError) else exc}. Check {DATABASE_SETTING} "
            "(or STEELFRAME_DATA_DIR, where the default database lives)."
        )
    if isinstance(exc, redis.exceptions.InvalidResponse):
        where = shown.get(REDIS_SETTING, "the configured Redis")
        return (
            f"cannot reach Redis at {where}: what answers there does not speak Redis "
            f"({_first_line(exc)}). Check {REDIS_SETTING}: its port may be another service's."
        )
    return None


def explain_listen(exc: OSError, host: str, port: int) -> str | None:
    """The message for a server socket that could not be opened."""
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {host}:{port}: the port is already in use. "
            "Stop the other process or choose another port with --port (make run PORT=9000)."
        )
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EACCES, errno.EPERM):
        return f"cannot listen on {host}:{port}: {exc.strerror}. Check --host and --port."
    return None


def _sqlite_folder_problem(exc: BaseException, settings: Settings | None) -> str | None:
    """The folder of the SQLite database that could not be made, when that is `exc`."""
    if settings is None or not isinstance(exc, OSError) or not exc.filename:
        return None
    url = settings.database_url
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    failed = str(exc.filename)
    return failed if path.startswith(failed.rstrip("/") + "/") else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # SQLAlchemy appends "(Background on this error at: https://sqlalche.me/...)" lines.
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.rstrip(".")[:300]
