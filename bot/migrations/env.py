"""Alembic environment: runs on the engine the caller passes (see bot.db.upgrade)."""

from __future__ import annotations

from alembic import context

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
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        context.run_migrations()


run_migrations_online()
