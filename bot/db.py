"""Database plumbing: the declarative base, engines for SQLite and PostgreSQL, migrations.

Core functions take a `Session`; the web service runs them in a thread (`Database.run`) so
the same code serves HTTP handlers and RQ workers.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar

from sqlalchemy import JSON, Connection, Engine, create_engine, event, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from bot.executors import StartedThreadPool
from memory.models import UTCDateTime  # memory may not import bot, so it owns the type

T = TypeVar("T")
P = ParamSpec("P")
# Threads for `Database.run_first`: a request waits on one such read at a time, and SQLite
# and psycopg release the GIL while they wait, so two keep reads moving while one is slow.
FIRST_READ_THREADS = 2
_FIRST_READS: StartedThreadPool | None = None
_FIRST_READS_LOCK = threading.Lock()


def first_reads() -> StartedThreadPool:
    """Threads of their own for the reads a request waits on before it can answer
    (`Database.run_first`), one pool per process: on the shared pool they queued behind
    retrieval and batched writes, and 1,000 chat streams opened within a second waited
    0.5-1 s for their first frame. A serving process makes it at start-up (its threads
    started then, not on the loop inside a request: bot/executors.py)."""
    global _FIRST_READS
    with _FIRST_READS_LOCK:
        if _FIRST_READS is None:
            _FIRST_READS = StartedThreadPool(FIRST_READ_THREADS, thread_name_prefix="db-first")
        return _FIRST_READS


MIGRATIONS_DIR = Path(__file__).parent / "migrations"


JSONType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSONType,
    }


# The page size of a new SQLite database (`create_db_engine`).
SQLITE_PAGE_SIZE = 8192
# PostgreSQL's SQLSTATE for "could not obtain lock" (lock_timeout, NOWAIT).
LOCK_NOT_AVAILABLE = "55P03"


def create_db_engine(url: str, *, lock_timeout: float | None = None, **kwargs: Any) -> Engine:
    """An engine with the per-backend settings Steelframe relies on.

    SQLite: the file's folder is created, WAL lets readers run beside the one writer,
    foreign keys are enforced (deleted sessions must cascade and refuse orphans), a busy
    timeout queues writers instead of failing them, and a new database gets 8 KB pages.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {"check_same_thread": False, "timeout": 30})
        engine = create_engine(url, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            # Before WAL, which fixes the page size; only a new (empty) database takes it.
            # Three compressed webhook bodies (~2.3 KB) fit a page where one fitted 4 KB,
            # and each page is one write less: 1.07x deliveries a second (bench/README.md).
            cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        event.listen(engine, "before_execute", _sqlite_lock_for_update)
        return engine
    if parsed.drivername in ("postgres", "postgresql", "postgresql+psycopg2"):
        url = parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    kwargs.setdefault("pool_pre_ping", True)
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    engine = create_engine(url, **kwargs)
    if lock_timeout is not None:
        _bound_lock_waits(engine, lock_timeout)
    return engine


def _sqlite_lock_for_update(
    connection: Connection, statement: Any, *_args: Any, **_kwargs: Any
) -> None:
    """`SELECT ... FOR UPDATE` on SQLite takes the database's write lock first, so what a
    transaction reads under it stays true until it commits, as a row lock makes it on
    PostgreSQL. SQLite has no row locks (SQLAlchemy leaves the clause out), and the driver
    begins a transaction only at the first write: the read and the write after it were two
    moments, and another process could commit between them (a takeover between a run's
    lease check and its change let the stalled run's change land after it)."""
    for_update = getattr(statement, "_for_update_arg", None)
    if for_update is None:
        return
    driver = connection.connection.driver_connection
    if driver is not None and not driver.in_transaction:
        # Waits for the lock as long as any write does (the busy timeout).
        driver.execute("BEGIN IMMEDIATE")


def _bound_lock_waits(engine: Engine, seconds: float) -> None:
    """Every statement on this engine waits at most `seconds` for a row lock, so a frozen
    process holding one (a SIGSTOP'd work horse) cannot hang a request: the statement fails
    with LOCK_NOT_AVAILABLE instead. Set per connection and committed, so it survives the
    pool's rollback on check-in."""

    @event.listens_for(engine, "connect")
    def _lock_timeout(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET lock_timeout = {int(seconds * 1000)}")
        cursor.close()
        dbapi_connection.commit()


def bound_lock_wait(session: Session, seconds: float) -> None:
    """This transaction waits at most `seconds` for a row lock (PostgreSQL; SQLite's busy
    timeout already bounds its whole-file lock)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"SET LOCAL lock_timeout = {int(seconds * 1000)}"))


def is_lock_timeout(exc: BaseException) -> bool:
    """A lock wait gave up: PostgreSQL's lock_timeout/NOWAIT, or SQLite's busy timeout."""
    if not isinstance(exc, OperationalError):
        return False
    if getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
        return True
    return "database is locked" in str(exc.orig)


def alembic_config(engine: Engine) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine) -> None:
    """Apply every migration (`alembic upgrade heads`); safe to run on every start."""
    from alembic import command

    command.upgrade(alembic_config(engine), "heads")


def ping(engine: Engine) -> bool:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


class Database:
    """One engine and its session factory, created once per process and passed down."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(cls, url: str, *, lock_timeout: float | None = None) -> Database:
        return cls(create_db_engine(url, lock_timeout=lock_timeout))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on error."""
        with self.sessions.begin() as session:
            yield session

    def call(
        self, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        with self.session() as session:
            return fn(session, *args, **kwargs)

    async def run(
        self, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `fn(session, *args)` in one transaction on a worker thread."""
        return await asyncio.to_thread(functools.partial(self.call, fn, *args, **kwargs))

    async def run_first(
        self, fn: Callable[Concatenate[Session, P], T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`run` for a read a request is waiting on to answer (who is asking, which session),
        on threads no background work queues on."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        call = functools.partial(context.run, self.call, fn, *args, **kwargs)
        return await loop.run_in_executor(first_reads(), call)

    def dispose(self) -> None:
        """Close pooled connections (the next call opens new ones)."""
        self.engine.dispose()


def current_revisions(engine: Engine) -> tuple[str, ...]:
    """The migrations applied to this database (empty before the first upgrade)."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return tuple(MigrationContext.configure(connection).get_current_heads())


def migration_history() -> list[tuple[str, str]]:
    """(revision, one-line description) of every migration, oldest first."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(MIGRATIONS_DIR))
    return [
        (script.revision, (script.doc or "").strip())
        for script in reversed(list(scripts.walk_revisions()))
    ]
