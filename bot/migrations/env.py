"""Alembic environment: runs on the engine the caller passes (see bot.db.upgrade)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from bot.db import Base

config = context.config


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        from bot.db import create_db_engine

        url = config.get_main_option("sqlalchemy.url")
        if not url:
            raise RuntimeError("no engine and no sqlalchemy.url given to the migrations")
        engine = create_db_engine(url)
    with engine.begin() as connection:
        _serialise(connection)
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        context.run_migrations()


def _serialise(connection: Connection) -> None:
    """One migrating process at a time, so `serve` and `worker` may all start at once.

    PostgreSQL: a transaction-scoped advisory lock keyed by the schema; whoever waited finds
    the version table already at head and does nothing. SQLite: BEGIN IMMEDIATE takes the
    file's write lock before the version is read (the busy timeout queues the others)."""
    if connection.dialect.name == "postgresql":
        # Wait as long as the migrating process needs, whatever the engine's request bound.
        connection.execute(text("SET LOCAL lock_timeout = 0"))
        key = "hashtext('steelframe-migrations:' || current_schema())"
        connection.execute(text(f"SELECT pg_advisory_xact_lock({key})"))
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")


run_migrations_online()
