"""`steelframe memory forget` by key and by issue, and a corrupt index rebuilt at start,
against a real database and index."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.db import Database, upgrade
from memory import ChunkIn, ChunkSource, Memory
from memory.manifest import MANIFEST
from steelframe.cli import main


@pytest.fixture(autouse=True)
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no stray steelframe.toml
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'steelframe.db'}")
    monkeypatch.setenv("STEELFRAME_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("STEELFRAME_REPO", "acme/app")


def _search(query: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["memory", "search", query, "--floor", "0"]) == 0
    return capsys.readouterr().out


def test_forget_by_key_prints_what_it_forgot_and_search_no_longer_finds_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["memory", "add", "the vault passphrase is tangerine", "--key", "note:vault"]) == 0
    assert main(["memory", "add", "tangerine is also a colour", "--key", "note:colour"]) == 0
    capsys.readouterr()
    assert main(["memory", "forget", "note:vault"]) == 0
    assert capsys.readouterr().out.splitlines() == ["forgot chunk 1 (note, key note:vault)"]
    out = _search("tangerine", capsys)
    assert "tangerine is also a colour" in out and "passphrase" not in out


def test_forget_an_unknown_key_exits_1_and_says_so_forgetting_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["memory", "add", "deploys run on tuesdays", "--key", "note:deploys"]) == 0
    capsys.readouterr()
    assert main(["memory", "forget", "note:deplyos", "note:deploys"]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == "steelframe: no chunk in memory under key 'note:deplyos'"
    assert captured.out.splitlines() == ["forgot chunk 1 (note, key note:deploys)"]
    assert main(["memory", "forget", "note:deploys"]) == 1  # already forgotten
    assert "no chunk in memory under key 'note:deploys'" in capsys.readouterr().err


def test_forget_an_issue_forgets_every_chunk_about_it_in_that_repository(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (
        ["a kestrel nests by the deploy job", "--issue", "7", "--source", "issue", "--key", "i7"],
        ["kestrels again", "--issue", "7", "--source", "worker_session"],
        ["a kestrel in another repo", "--issue", "7", "--repo", "acme/other", "--key", "o7"],
        ["a kestrel on issue 8", "--issue", "8", "--key", "i8"],
    ):
        assert main(["memory", "add", *argv]) == 0
    capsys.readouterr()
    assert main(["memory", "forget", "--issue", "7"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "forgot chunk 1 (issue on #7, key i7)",
        "forgot chunk 2 (worker_session on #7)",
    ]
    out = _search("kestrel", capsys)
    assert "a kestrel in another repo" in out and "a kestrel on issue 8" in out
    assert "deploy job" not in out and "kestrels again" not in out
    assert main(["memory", "forget", "--issue", "7"]) == 1
    assert capsys.readouterr().err.strip() == "steelframe: nothing in memory about #7 in acme/app"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "forget"], "give chunk keys or --issue N"),
        (["memory", "forget", "k", "--issue", "3"], "give chunk keys or --issue N"),
        (["memory", "forget", "--issue", "0"], "--issue must be a positive number"),
    ],
)
def test_forget_with_bad_arguments_exits_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["garbled manifest", "truncated segment", "missing segment"])
def test_a_corrupt_index_is_rebuilt_from_the_rows_at_start_with_a_log_line(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    database = Database.from_url(f"sqlite:///{tmp_path / 'steelframe.db'}")
    upgrade(database.engine)
    root = tmp_path / "var" / "memory"
    Memory(root, database.session).add(
        [ChunkIn(f"egret sighting number {i}", ChunkSource.NOTE, "o/r") for i in range(3)]
    )
    if damage == "garbled manifest":
        (root / MANIFEST).write_text("{")
    else:
        segment = next(root.glob("seg-*"))
        if damage == "missing segment":
            segment.unlink()
        else:
            segment.write_bytes(segment.read_bytes()[:100])
    started = Memory(root, database.session)  # the next start of a process
    with caplog.at_level(logging.INFO, logger="memory.service"):
        assert started.bind() == "rebuilt"
    assert f"the index in {root} is corrupt" in caplog.text
    assert f"the index in {root} was rebuilt from the database (3 chunks)" in caplog.text
    assert len(started.search("egret sighting", repo="o/r", k=10)) == 3
    assert Memory(root, database.session).bind() == "current"  # and stays repaired
    database.dispose()
