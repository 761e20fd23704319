"""Fresh SQLite databases in a test process get the migrated schema copied from a template.

Why: the suite migrated ~980 fresh, empty SQLite files from nothing (`bot.db.upgrade`, which
is `alembic upgrade heads`: ~50 ms of CPU each once warm), through the `any_db` fixture, the
tests' own `upgrade(...)` calls and the app built in-process (`steelframe.parts`,
`steelframe.cli`, `steelframe.commands.*` call `dbmod.upgrade`) -- 84 CPU-seconds of a
CPU-bound run on two cores. Copying a migrated database's pages costs about a millisecond.

How: this module is a pytest plugin (tests/conftest.py lists it in `pytest_plugins`); at
`pytest_configure` it replaces `bot.db.upgrade` with a `TemplateMigrations`, so both the
product's `dbmod.upgrade(...)` and a test's later `from bot.db import upgrade` call it. The
first time a fresh, empty SQLite file is to be migrated in this process (per combination of
the file settings a template must share with its target: `FileSettings`), the real upgrade
migrates it and the result is backed up into a template file of this process's own. From
then on a fresh, empty SQLite file with the same settings gets the template's pages through
SQLite's online backup API (`sqlite3.Connection.backup`), written through a connection of
the target's own engine.

Why it is sound:
- The migration chain does the same thing on every empty database: its data steps (UPDATE,
  INSERT ... SELECT) find no rows, nothing reads the clock, the environment or randomness,
  and the SQLite library and the migration scripts are the same throughout a process.
- The backup copies every page of the template, so the schema (sqlite_master), the
  alembic_version row, the free pages and `user_version` are what the real upgrade left in
  a database like this one: the file is byte for byte the real upgrade's but for the
  header's schema cookie (the target's old one plus one, so any other connection already
  open on the target rereads the schema before its next statement). tests/test_migrated.py
  checks it. The target is looked at again just before the copy, under a lock, so a
  database another thread has migrated meanwhile goes to the real upgrade.
- The file settings a database keeps (page size, journal mode, auto_vacuum, encoding) are
  part of the template's key, as is foreign_keys (which alembic's table rebuilds depend
  on): a target opened some other way gets a template of its own, made by its own first
  real upgrade. A WAL target stays in WAL mode (the backup API keeps the target's mode and
  refuses a page size it cannot take). Per-connection pragmas (foreign_keys, synchronous,
  busy_timeout) are the engine's own: the copy goes through the engine's connection and
  changes none of them; no file is copied under an open connection.

Where the real migration still runs:
- the first fresh SQLite file per process and per `FileSettings`;
- every database that is not a fresh, empty SQLite file: PostgreSQL (every PostgreSQL test),
  an in-memory or temporary database, a file with any table, index, view or trigger (an
  `alembic_version` table included, so a downgraded database is upgraded for real) or
  with a `user_version`/`application_id` set;
- every test that checks migrations themselves (`wants_real_migrations`: tests/test_storage.py
  and any test whose name says migration or `db`), from setup to teardown;
- every child process: `serve`, `worker` and the CLI started as subprocesses do not load
  this plugin and migrate their databases for real.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from bot import db as dbmod

Upgrade = Callable[[Engine], None]

# Test modules whose subject is the migrations and the storage under them: every database
# they make is migrated for real.
REAL_MIGRATION_MODULES = frozenset({"test_storage.py"})


@dataclass(frozen=True)
class FileSettings:
    """What a fresh SQLite database keeps of how it was opened (and what alembic's table
    rebuilds depend on): a template serves only targets whose settings are its own."""

    page_size: int
    journal_mode: str
    auto_vacuum: int
    encoding: str
    foreign_keys: int


def _pragma(connection: sqlite3.Connection, name: str) -> int | str:
    value: int | str = connection.execute(f"PRAGMA {name}").fetchone()[0]
    return value


def fresh_file_settings(connection: sqlite3.Connection) -> FileSettings | None:
    """The settings of the database on `connection` if it is an empty SQLite file (no schema
    object at all, no user_version or application_id), else None."""
    if connection.in_transaction:
        return None
    files = {row[1]: row[2] for row in connection.execute("PRAGMA database_list")}
    if not files.get("main"):  # in-memory or temporary: nothing to share a template with
        return None
    if connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        return None
    if _pragma(connection, "user_version") or _pragma(connection, "application_id"):
        return None
    return FileSettings(
        page_size=int(_pragma(connection, "page_size")),
        journal_mode=str(_pragma(connection, "journal_mode")),
        auto_vacuum=int(_pragma(connection, "auto_vacuum")),
        encoding=str(_pragma(connection, "encoding")),
        foreign_keys=int(_pragma(connection, "foreign_keys")),
    )


class TemplateMigrations:
    """`bot.db.upgrade` for a test process: the real upgrade, except that a fresh, empty
    SQLite file gets the pages of one the real upgrade migrated before (see the module)."""

    def __init__(self, real: Upgrade) -> None:
        self.real = real
        # Set for the tests that check the migrations themselves (`wants_real_migrations`).
        self.real_only = False
        self.real_runs = 0
        self.copies = 0
        self._templates: dict[FileSettings, sqlite3.Connection] = {}
        self._folder: Path | None = None
        # The app built in-process may migrate from a thread of its own.
        self._lock = threading.Lock()

    def __call__(self, engine: Engine) -> None:
        if self.real_only or engine.dialect.name != "sqlite":
            self._run_real(engine)
            return
        with engine.connect() as connection:
            target = connection.connection.driver_connection
            if not isinstance(target, sqlite3.Connection):
                settings = None
            else:
                settings = fresh_file_settings(target)
            if settings is not None and self._copy(settings, target):
                return
        self._run_real(engine)
        if settings is not None:
            self._keep_as_template(settings, engine)

    def _run_real(self, engine: Engine) -> None:
        self.real(engine)
        self.real_runs += 1

    def _copy(self, settings: FileSettings, target: sqlite3.Connection) -> bool:
        with self._lock:
            template = self._templates.get(settings)
            # Looked at again under the lock: a thread that copied or migrated meanwhile
            # leaves it to the real upgrade (which finds it at the head).
            if template is None or fresh_file_settings(target) != settings:
                return False
            template.backup(target)
            self.copies += 1
            return True

    def _keep_as_template(self, settings: FileSettings, engine: Engine) -> None:
        """The database the real upgrade just migrated, backed up into a file of our own."""
        with self._lock:
            if settings in self._templates:
                return
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix="steelframe-migrated-"))
            path = self._folder / f"template-{len(self._templates)}.db"
            template = sqlite3.connect(path, check_same_thread=False)
            with engine.connect() as connection:
                source = connection.connection.driver_connection
                assert isinstance(source, sqlite3.Connection)
                source.backup(template)
            self._templates[settings] = template

    def close(self) -> None:
        """Close and remove the templates."""
        with self._lock:
            for template in self._templates.values():
                template.close()
            self._templates.clear()
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = None


def wants_real_migrations(item: pytest.Item) -> bool:
    """A test of the migrations themselves (or of the `db` commands): its databases are
    migrated for real."""
    name = item.name.lower()
    return (
        item.path.name in REAL_MIGRATION_MODULES or "migrat" in name or name.startswith("test_db_")
    )


_INSTALLED: dict[str, tuple[pytest.MonkeyPatch, TemplateMigrations]] = {}


def installed() -> TemplateMigrations | None:
    """The `TemplateMigrations` standing in for `bot.db.upgrade` in this process, if any."""
    entry = _INSTALLED.get("upgrade")
    return entry[1] if entry else None


def pytest_configure(config: pytest.Config) -> None:
    if "upgrade" in _INSTALLED:
        return
    patch = pytest.MonkeyPatch()
    migrations = TemplateMigrations(dbmod.upgrade)
    patch.setattr(dbmod, "upgrade", migrations)
    _INSTALLED["upgrade"] = (patch, migrations)


def pytest_unconfigure(config: pytest.Config) -> None:
    entry = _INSTALLED.pop("upgrade", None)
    if entry is not None:
        patch, migrations = entry
        patch.undo()
        migrations.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    migrations = installed()
    if migrations is None or not wants_real_migrations(item):
        return (yield)
    migrations.real_only = True
    try:
        return (yield)
    finally:
        migrations.real_only = False
