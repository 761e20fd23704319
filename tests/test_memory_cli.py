"""`steelframe memory add|search|reindex` against a real database and index."""

from __future__ import annotations

from pathlib import Path

import pytest

from steelframe.cli import main


@pytest.fixture(autouse=True)
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no stray steelframe.toml
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'steelframe.db'}")
    monkeypatch.setenv("STEELFRAME_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("STEELFRAME_REPO", "acme/app")


def test_add_then_search_prints_hits_with_scores_and_provenance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "memory",
                "add",
                "Pinned redis to 7.2 after the RQ upgrade",
                "--issue",
                "41",
                "--source",
                "worker_session",
                "--paths",
                "bot/queue.py, requirements.txt",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip() == "stored chunk 1"
    assert main(["memory", "search", "redis upgrade"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1. 0.")
    assert (
        "#41 · worker_session · acme/app · chunk 1 · paths bot/queue.py, requirements.txt" in out[0]
    )
    assert out[1].strip() == "Pinned redis to 7.2 after the RQ upgrade"


def test_add_with_the_same_key_is_idempotent_then_replaces(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["memory", "add", "first text", "--key", "k1"]) == 0
    assert main(["memory", "add", "first text", "--key", "k1"]) == 0
    assert main(["memory", "add", "second text", "--key", "k1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "stored chunk 1",
        "already stored as chunk 1 (same key, same content)",
        "stored chunk 2, replacing chunk 1",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "add", "text", "--source", "gossip"], "source 'gossip' is not one of"),
        (["memory", "add", "text", "--repo", "no-slash"], "must look like owner/name"),
        (["memory", "add", "   "], "text is required"),
        (["memory", "search", "x", "-k", "0"], "-k must be positive"),
        (["memory", "search", "x", "--floor", "2"], "--floor between 0 and 1"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert main(["memory", "search", "text", "--floor", "0"]) == 0
    assert "no hits" in capsys.readouterr().out  # nothing was stored


def test_reindex_shows_progress_and_rebuilds(capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        main(["memory", "add", f"chunk about topic {i}"])
    capsys.readouterr()
    assert main(["memory", "reindex"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "reindex [" + "." * 30 + "]   0% 0/3 chunks"
    assert out[-2] == "reindex [" + "#" * 30 + "] 100% 3/3 chunks"
    assert out[-1].startswith("index rebuilt: 3 chunks in 1 segment(s)")


def test_search_on_a_corrupt_index_rebuilds_it_first_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["memory", "add", "chunk text"])
    (tmp_path / "var" / "memory" / "manifest.json").write_text("{")
    assert main(["memory", "search", "chunk text"]) == 0
    captured = capsys.readouterr()
    assert "memory index rebuilt from this database" in captured.err
    assert "1. " in captured.out


def test_start_up_rebuilds_an_index_of_an_older_analysis_with_a_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import json

    from steelframe.cli import load_settings
    from steelframe.commands.memory import upgrade_memory_index

    for i in range(3):
        assert main(["memory", "add", f"deploys of build {i}"]) == 0
    capsys.readouterr()
    manifest = tmp_path / "var" / "memory" / "manifest.json"
    old = json.loads(manifest.read_text())
    old["analysis"]["version"] = 1  # what the previous release wrote
    manifest.write_text(json.dumps(old))
    out = io.StringIO()
    upgrade_memory_index(load_settings(), out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("memory index rebuild (new analysis) [")
    assert lines[-2].endswith("100% 3/3 chunks") and lines[-1] == "memory index rebuilt"
    again = io.StringIO()
    upgrade_memory_index(load_settings(), again)
    assert again.getvalue() == ""  # current now: nothing to do
    assert main(["memory", "search", "deployed builds"]) == 0  # stemmed: the new analysis
    assert capsys.readouterr().out.count("deploys of build") == 3


@pytest.mark.parametrize("query", ["", "   "])
def test_search_for_nothing_says_the_query_is_empty(
    query: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "add", "Pinned redis to 7.2"]) == 0
    capsys.readouterr()
    assert main(["memory", "search", query]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "steelframe: the query is empty: say what to look for\n"
