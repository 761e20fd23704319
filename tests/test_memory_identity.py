"""The memory index is bound to its database: an index under the data directory built from
another database is rebuilt (with progress) or refused, never answered from."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings
from bot.db import Database, upgrade
from memory import ChunkIn, ChunkSource, Memory
from memory.errors import IndexForeign
from memory.identity import database_identity
from memory.manifest import MANIFEST
from steelframe.parts import build_parts


def _database(url: str) -> Database:
    database = Database.from_url(url)
    upgrade(database.engine)
    return database


@pytest.fixture
def dev_db(tmp_path: Path) -> Iterator[Database]:
    database = _database(f"sqlite:///{tmp_path / 'dev.db'}")
    yield database
    database.dispose()


@pytest.fixture
def other_db(any_db_url: str) -> Iterator[Database]:
    database = _database(any_db_url)
    yield database
    database.dispose()


def _note(text: str) -> ChunkIn:
    return ChunkIn(text=text, source=ChunkSource.NOTE, repo="o/r")


def _texts(memory: Memory, query: str) -> list[str]:
    return [hit.record.text for hit in memory.search(query, repo=None)]


def test_each_database_has_one_stable_identity(dev_db: Database, other_db: Database) -> None:
    first = dev_db.call(database_identity)
    assert dev_db.call(database_identity) == first
    assert other_db.call(database_identity) != first


def test_an_index_of_another_database_is_rebuilt_not_answered_from(
    dev_db: Database, other_db: Database, tmp_path: Path
) -> None:
    shared = tmp_path / "var" / "memory"  # one data directory, two databases
    dev = Memory(shared, dev_db.session)
    dev.add([_note("the zebra migration plan lives in dev only")])
    dev.add([_note(f"dev filler note number {n} about giraffes") for n in range(30)])
    assert _texts(dev, "zebra migration")

    other = Memory(shared, other_db.session)
    seen: list[tuple[int, int]] = []
    assert other.bind(progress=lambda done, total: seen.append((done, total))) == "rebuilt"
    assert seen and seen[-1][0] == seen[-1][1]  # progress reached the end
    assert _texts(other, "zebra migration") == []  # nothing of dev's rows
    # A chunk of this database is searchable at once (no watermark from the other one).
    other.add([_note("the okapi rollout belongs to this database")])
    assert _texts(other, "okapi rollout") == ["the okapi rollout belongs to this database"]


def test_a_process_whose_index_is_taken_over_refuses_rather_than_answer(
    dev_db: Database, other_db: Database, tmp_path: Path
) -> None:
    shared = tmp_path / "memory"
    dev = Memory(shared, dev_db.session)
    dev.add([_note("the zebra migration plan lives in dev only")])
    assert _texts(dev, "zebra") == ["the zebra migration plan lives in dev only"]
    other = Memory(shared, other_db.session)
    other.add([_note("zebra facts from the other database")])  # binds: rebuilds for itself
    with pytest.raises(IndexForeign, match="another database") as refused:
        dev.search("zebra", repo=None)
    assert "steelframe memory reindex" in refused.value.message
    with pytest.raises(IndexForeign):
        dev.sync()  # nor does it write its rows into the other's index


def test_an_index_from_before_identities_is_rebuilt(dev_db: Database, tmp_path: Path) -> None:
    root = tmp_path / "memory"
    memory = Memory(root, dev_db.session)
    memory.add([_note("an old note about walruses")])
    manifest = root / MANIFEST
    manifest.write_text(manifest.read_text().replace(',"database":"', ',"was":"'))
    again = Memory(root, dev_db.session)
    assert again.bind() == "rebuilt"
    assert _texts(again, "walruses") == ["an old note about walruses"]


def test_serve_rebuilds_a_foreign_index_at_start_and_logs_progress(
    dev_db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "var"
    Memory.in_data_dir(data_dir, dev_db.session).add([_note("dev's own zebra")])
    settings = Settings.from_env(
        {},
        defaults={
            "database_url": f"sqlite:///{tmp_path / 'prod.db'}",
            "data_dir": data_dir,
            "checkout": tmp_path,
        },
    )
    with caplog.at_level(logging.WARNING, logger="steelframe.parts"):
        services = build_parts(settings)
    try:
        assert services.memory is not None
        assert services.memory.search("zebra", repo=None) == []
    finally:
        services.db.dispose()
    lines = [r.getMessage() for r in caplog.records]
    assert any("rebuilding the index" in line for line in lines), lines


def test_the_cli_on_another_database_rebuilds_the_shared_index_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from steelframe.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STEELFRAME_DATA_DIR", str(tmp_path / "var"))  # shared by both
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'dev.db'}")
    assert main(["memory", "add", "the zebra migration plan", "--repo", "o/r"]) == 0
    assert main(["memory", "search", "zebra migration", "--floor", "0"]) == 0
    assert "zebra migration plan" in capsys.readouterr().out

    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'prod.db'}")
    assert main(["memory", "search", "zebra migration", "--floor", "0"]) == 0
    captured = capsys.readouterr()
    assert "zebra" not in captured.out  # never an answer from dev's database
    assert "memory index rebuilt from this database" in captured.err
