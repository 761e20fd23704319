"""Storage on SQLite and PostgreSQL: migrations, the chat flow, cascades."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from sqlalchemy import inspect, text

from bot import db as dbmod
from tests.conftest import make_settings, read_sse, store_deliveries
from webhooks.deliveries import DeliveryBody, NewDelivery


def test_migrations_upgrade_downgrade_upgrade(any_db_url: str) -> None:
    engine = dbmod.create_db_engine(any_db_url)
    dbmod.upgrade(engine)
    tables = set(inspect(engine).get_table_names())
    assert {"operators", "agents", "chat_sessions", "chat_turns"} <= tables
    indexes = {ix["name"] for ix in inspect(engine).get_indexes("chat_sessions")}
    assert "ix_chat_sessions_operator_activity" in indexes
    command.downgrade(dbmod.alembic_config(engine), "base")
    assert "chat_turns" not in set(inspect(engine).get_table_names())
    dbmod.upgrade(engine)  # and again: start-up runs it every time
    dbmod.upgrade(engine)
    assert "chat_turns" in set(inspect(engine).get_table_names())
    engine.dispose()


async def test_chat_flow_on_each_backend(api_factory: Any, tmp_path: Path, any_db_url: str) -> None:
    api = await api_factory(make_settings(tmp_path, database_url=any_db_url))
    frames = await read_sse(
        await api.post("/api/operator/chat/stream", json={"message": "hello db"})
    )
    done = frames[-1]["response"]
    other = api.new_operator("someone-else")
    assert (await other.get(f"/api/operator/chat/session/{done['session']}")).status == 404
    created = await (await api.post("/api/operator/chat/new", json={"issue": 4})).json()
    await api.services.background.drain()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert [s["id"] for s in sessions] == [created["id"], done["session"]]
    assert sessions[1]["summary_status"] == "done"
    assert (await api.delete(f"/api/operator/chat/session/{done['session']}")).status == 200
    assert len((await (await api.get("/api/operator/chat/sessions")).json())["sessions"]) == 1


def _store_body(engine: Any, delivery_id: str, body: str) -> list[str]:
    """Store a webhook body; each stored body's compression method, in delivery order."""
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO github_delivery_bodies (delivery_id, body) VALUES (:id, :body)"),
            {"id": delivery_id, "body": body},
        )
        assert (
            connection.scalar(
                text("SELECT body FROM github_delivery_bodies WHERE delivery_id = :id"),
                {"id": delivery_id},
            )
            == body
        )
        return list(
            connection.scalars(
                text(
                    "SELECT pg_column_compression(body) FROM github_delivery_bodies"
                    " ORDER BY delivery_id"
                )
            )
        )


def test_webhook_bodies_are_compressed_with_lz4_on_postgresql(pg_url: str) -> None:
    """The database's CPU per delivery under a burst was mostly pglz compressing bodies."""
    engine = dbmod.create_db_engine(pg_url)
    dbmod.upgrade(engine)
    body = json.dumps({"action": "opened", "issue": {"body": "words " * 2000}})
    assert _store_body(engine, "d-1", body) == ["lz4"]
    command.downgrade(dbmod.alembic_config(engine), "0013_delivery_bodies")
    assert _store_body(engine, "d-2", body) == ["lz4", "pglz"]  # before, and after, it
    engine.dispose()


async def test_webhook_bodies_are_compressed_on_sqlite_and_read_back_as_signed(
    sqlite_url: str,
) -> None:
    """SQLite's writes are made by the process that acknowledges deliveries: a body is
    stored compressed, reads back as the exact text, and a downgrade restores the text."""
    engine = dbmod.create_db_engine(sqlite_url)
    dbmod.upgrade(engine)
    db = dbmod.Database(engine)
    issue = {"body": "Ünïcode ✓ words " * 500}
    body = json.dumps({"action": "opened", "issue": issue}, ensure_ascii=False)
    with engine.begin() as connection:  # a body an earlier version stored as text
        connection.execute(
            text("INSERT INTO github_delivery_bodies (delivery_id, body) VALUES ('old', :b)"),
            {"b": body},
        )
    new = NewDelivery("new", "issues", "opened", None, None, body, datetime.now(UTC))
    assert await store_deliveries(db, [new]) == {"new"}

    def stored() -> dict[str, tuple[str, int]]:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT delivery_id, typeof(body), length(body) FROM github_delivery_bodies")
            )
            return {id_: (kind, size) for id_, kind, size in rows}

    as_stored = stored()
    assert as_stored["old"] == ("text", len(body))
    kind, size = as_stored["new"]
    assert kind == "blob" and size < len(body.encode()) / 4
    assert db.call(lambda s: [s.get(DeliveryBody, i).body for i in ("old", "new")]) == [body] * 2

    command.downgrade(dbmod.alembic_config(engine), "0014_body_lz4")
    assert stored() == {"old": ("text", len(body)), "new": ("text", len(body))}
    with engine.connect() as connection:
        assert set(connection.scalars(text("SELECT body FROM github_delivery_bodies"))) == {body}
    engine.dispose()


def test_a_new_sqlite_database_has_8_kb_pages_and_an_older_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    older = tmp_path / "older.db"
    with sqlite3.connect(older) as connection:  # an earlier version's file: 4 KB pages, WAL
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE kept (x)")
    connection.close()
    for path, size in ((tmp_path / "new.db", dbmod.SQLITE_PAGE_SIZE), (older, 4096)):
        engine = dbmod.create_db_engine(f"sqlite:///{path}")
        dbmod.upgrade(engine)
        with engine.connect() as connection:
            assert connection.scalar(text("PRAGMA page_size")) == size
            assert connection.scalar(text("PRAGMA journal_mode")) == "wal"
        engine.dispose()
