"""The template a test process migrates fresh SQLite databases from (tests/fakes/migrated.py):
a copy is what the real upgrade makes, and any other database is upgraded for real."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, Engine, inspect, text

from bot import db as dbmod
from bot.db import upgrade
from bot.operators import authenticate, create_operator
from tests.fakes.migrated import TemplateMigrations, Upgrade, installed

# What a connection of the engine has set (bot.db.create_db_engine) or the file keeps.
PRAGMAS = (
    "page_size",
    "journal_mode",
    "foreign_keys",
    "synchronous",
    "busy_timeout",
    "auto_vacuum",
    "encoding",
    "user_version",
    "application_id",
    "freelist_count",
    "page_count",
)
# The header's schema cookie (bytes 40-43): the backup makes it the target's old one plus one.
SCHEMA_COOKIE = slice(40, 44)


def _real_upgrade() -> Upgrade:
    migrations = installed()
    assert migrations is not None, "tests/conftest.py does not load tests.fakes.migrated"
    return migrations.real


@pytest.fixture
def migrations() -> Iterator[TemplateMigrations]:
    """A template of this test's own, over the real upgrade."""
    own = TemplateMigrations(_real_upgrade())
    yield own
    own.close()


def _engine(path: Path) -> Engine:
    return dbmod.create_db_engine(f"sqlite:///{path}")


def _described(connection: Connection) -> dict[str, Any]:
    return {
        "schema": connection.execute(
            text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        ).all(),
        "alembic_version": connection.execute(text("SELECT version_num FROM alembic_version"))
        .scalars()
        .all(),
        **{name: connection.scalar(text(f"PRAGMA {name}")) for name in PRAGMAS},
    }


def _file_bytes(engine: Engine) -> bytearray:
    """The database file with its WAL written back, and its schema cookie left out."""
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    database = engine.url.database
    assert database is not None
    content = bytearray(Path(database).read_bytes())
    content[SCHEMA_COOKIE] = b"\0" * 4
    return content


def test_a_fresh_database_copied_from_the_template_is_what_the_real_upgrade_makes(
    tmp_path: Path, migrations: TemplateMigrations
) -> None:
    first, copied, real = (_engine(tmp_path / f"{name}.db") for name in ("f", "c", "r"))
    migrations(first)  # upgraded for real, and kept as the template
    assert (migrations.real_runs, migrations.copies) == (1, 0)
    held = copied.connect()  # a connection already open (its pragmas set) on the target
    held.execute(text("SELECT 1")).all()
    held.commit()
    migrations(copied)
    assert (migrations.real_runs, migrations.copies) == (1, 1)
    _real_upgrade()(real)

    with real.connect() as connection:
        expected = _described(connection)
    assert expected["alembic_version"] and expected["journal_mode"] == "wal"
    assert _described(held) == expected  # the open connection sees the new schema
    held.close()
    with copied.connect() as connection:
        assert _described(connection) == expected
        assert connection.scalar(text("PRAGMA integrity_check")) == "ok"
    assert dbmod.current_revisions(copied) == dbmod.current_revisions(real)
    # Byte for byte the real upgrade's file, but for the header's schema cookie.
    assert _file_bytes(copied) == _file_bytes(real)

    database = dbmod.Database.from_url(str(copied.url))  # and a database to work on
    operator, token = database.call(create_operator, "ada")
    assert database.call(authenticate, token).id == operator.id
    database.dispose()


def _with_a_table_of_its_own(path: Path) -> Engine:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE kept (x)")
    connection.close()
    return _engine(path)


def _downgraded(path: Path) -> Engine:
    engine = _engine(path)
    _real_upgrade()(engine)
    command.downgrade(dbmod.alembic_config(engine), "0003_github")
    return engine


def _with_a_user_version(path: Path) -> Engine:
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA user_version = 7")
    connection.close()
    return _engine(path)


def _in_memory(_path: Path) -> Engine:
    return dbmod.create_db_engine("sqlite://")


def _without_wal(path: Path) -> Engine:
    """Opened some other way than the service opens its files: 4 KB pages, no WAL."""
    from sqlalchemy import create_engine

    return create_engine(f"sqlite:///{path}")


@pytest.mark.parametrize(
    "made",
    [_with_a_table_of_its_own, _downgraded, _with_a_user_version, _in_memory, _without_wal],
)
def test_a_database_not_like_the_template_is_upgraded_for_real(
    tmp_path: Path, migrations: TemplateMigrations, made: Callable[[Path], Engine]
) -> None:
    migrations(_engine(tmp_path / "template.db"))
    engine = made(tmp_path / "other.db")
    migrations(engine)
    assert (migrations.real_runs, migrations.copies) == (2, 0)
    assert "chat_turns" in inspect(engine).get_table_names()
    assert dbmod.current_revisions(engine)
    if made is _with_a_table_of_its_own:
        assert "kept" in inspect(engine).get_table_names()
    engine.dispose()


def test_a_postgresql_database_is_upgraded_for_real(
    tmp_path: Path, migrations: TemplateMigrations, pg_url: str
) -> None:
    migrations(_engine(tmp_path / "template.db"))
    engine = dbmod.create_db_engine(pg_url)
    migrations(engine)
    assert (migrations.real_runs, migrations.copies) == (2, 0)
    assert "chat_turns" in inspect(engine).get_table_names()
    engine.dispose()


def test_the_suite_copies_fresh_sqlite_databases_from_the_template(tmp_path: Path) -> None:
    suite = installed()
    assert suite is not None and dbmod.upgrade is suite and upgrade is suite
    copies = suite.copies
    for name in ("one", "two"):  # the first may be this process's first: upgraded for real
        engine = _engine(tmp_path / f"{name}.db")
        upgrade(engine)
        assert "chat_turns" in inspect(engine).get_table_names()
        engine.dispose()
    assert suite.copies > copies


def test_a_migration_test_migrates_even_a_fresh_database_for_real(tmp_path: Path) -> None:
    suite = installed()
    assert suite is not None and suite.real_only
    copies, real_runs = suite.copies, suite.real_runs
    for name in ("one", "two"):
        engine = _engine(tmp_path / f"{name}.db")
        upgrade(engine)
        engine.dispose()
    assert (suite.copies, suite.real_runs) == (copies, real_runs + 2)
