"""The on-disk index: features, cosine search, filters, segments, merges, corruption."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from sklearn.utils import murmurhash3_32

from memory import analysis
from memory.analysis import N_FEATURES, Analyzer
from memory.errors import IndexCorrupt, IndexIncompatible
from memory.index import SearchIndex
from memory.manifest import MANIFEST
from memory.segment import Record
from memory.writer import MERGE_FACTOR, IndexWriter

TEXTS = [
    "The nightly BUILD failed: deploy-pipeline retries (3x) were flaky!",
    "Ünïcode wörds, naïve café — and the_snake_case tokens 42 x y z",
    "a I of the and",  # only stop words and 1-character runs
    "",
    "Repeat repeat REPEAT once twice, twice",
    "tabs\tand\nnewlines; path/to/file.py and #12 and v2.0.1",
]


def _record(i: int, text: str, *, repo: str = "o/r", issue: int | None = None) -> Record:
    return Record(id=i, source="note", repo=repo, text=text, issue=issue)


def _results(index: SearchIndex, query: str, **kwargs: object) -> list[tuple[int, float]]:
    return [(h.chunk_id, h.score) for h in index.search(query, repo=None, k=20, **kwargs)]  # type: ignore[arg-type]


def test_features_are_murmurhash_of_the_analysed_terms() -> None:
    analyzer = Analyzer()
    ours = analyzer.batch(TEXTS)
    for row, text in enumerate(TEXTS):
        counts: dict[int, int] = {}
        for term in analyzer.tokens(text):
            feature = abs(murmurhash3_32(term, seed=0)) % N_FEATURES
            counts[feature] = counts.get(feature, 0) + 1
        mine = ours.doc == row
        assert dict(zip(ours.term[mine].tolist(), ours.count[mine].tolist(), strict=True)) == counts
        terms, _ = analyzer.query(text)
        assert terms.tolist() == sorted(counts)


def test_the_stop_words_are_scikit_learns_without_importing_it() -> None:
    """memory reads scikit-learn's list from its file (importing the package costs ~0.8 s
    of CPU a process): the list must be the one the public import gives, and the hash the
    same function as scikit-learn's (the test above)."""
    assert analysis._english_stop_words() == frozenset(ENGLISH_STOP_WORDS)
    assert analysis.STOP_WORDS == (frozenset(ENGLISH_STOP_WORDS) - analysis._KEEP) | (
        analysis._QUESTION
    )


def test_search_ranks_by_cosine_with_scores_between_zero_and_one(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    with writer.update() as update:
        update.add(
            [
                _record(1, "redis pinned after the rq upgrade broke the workers"),
                _record(2, "the redis cache is warm"),
                _record(3, "lunch menu"),
            ]
        )
    hits = SearchIndex(tmp_path, Analyzer()).search("redis rq upgrade", repo="o/r")
    assert [h.chunk_id for h in hits] == [1, 2]
    assert 1.0 >= hits[0].score > hits[1].score > 0.0
    assert hits[0].record.text.startswith("redis pinned")


def test_repo_filter_focus_boost_and_focus_scope(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    with writer.update() as update:
        update.add(
            [
                _record(1, "deploy pipeline retries", issue=5),
                _record(2, "deploy pipeline retries flaky", issue=9),
                _record(3, "deploy pipeline retries", repo="o/other"),
            ]
        )
    index = SearchIndex(tmp_path, Analyzer())
    assert {h.chunk_id for h in index.search("deploy retries", repo="o/r")} == {1, 2}
    assert index.search("deploy retries", repo="nobody/here") == []
    assert index.search("deploy retries", repo="o/r")[0].chunk_id == 1
    lifted = index.search("deploy retries", repo="o/r", focus=9)
    assert lifted[0].chunk_id == 2  # the boost moves the ranking...
    plain = {h.chunk_id: h.score for h in index.search("deploy retries", repo="o/r")}
    assert lifted[0].score == plain[2]  # ...never the reported cosine
    assert [
        h.chunk_id for h in index.search("deploy retries", repo="o/r", focus=9, focus_only=True)
    ] == [2]


def test_floor_keeps_only_hits_at_or_above_it(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    with writer.update() as update:
        update.add([_record(1, "alpha beta gamma delta"), _record(2, "alpha " + "filler " * 40)])
    index = SearchIndex(tmp_path, Analyzer())
    scores = dict(_results(index, "alpha beta"))
    floor = (scores[1] + scores[2]) / 2
    assert [h.chunk_id for h in index.search("alpha beta", repo=None, floor=floor)] == [1]
    assert [h.chunk_id for h in index.search("alpha beta", repo=None, floor=scores[1])] == [1]


def test_a_new_reader_loads_the_same_index_from_disk(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    for start in range(0, 30, 10):
        with writer.update() as update:
            update.add(
                [
                    _record(i, f"chunk {i} about topic{i % 3} and words")
                    for i in range(start + 1, start + 11)
                ]
            )
    first = _results(SearchIndex(tmp_path, Analyzer()), "topic1")
    assert len(first) == 10
    assert _results(SearchIndex(tmp_path, Analyzer()), "topic1") == first


def test_merging_segments_changes_no_result(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    for batch in range(MERGE_FACTOR + 1):
        with writer.update() as update:
            update.add(
                [
                    _record(batch * 5 + i, f"item {i} group{batch % 4} shared text {batch}")
                    for i in range(1, 6)
                ]
            )
    index = SearchIndex(tmp_path, Analyzer())
    before = {q: _results(index, q) for q in ("group1 shared", "item text", "group3")}
    assert writer.merge_due()
    assert writer.merge_once()
    assert len(index.snapshot().segments) < MERGE_FACTOR + 1
    assert {q: _results(index, q) for q in before} == before


def test_reader_never_sees_a_half_written_update(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    index = SearchIndex(tmp_path, Analyzer())
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        while not done.is_set():
            try:
                snapshot = index.snapshot()
                seen.append(snapshot.manifest.live_docs)
                hits = index.search("common words", repo=None, k=200)
                assert len(hits) % 10 == 0 or len(hits) == 200
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for batch in range(12):
            with writer.update() as update:
                update.add([_record(batch * 10 + i, f"common words {i}") for i in range(1, 11)])
            writer.merge_once()
    finally:
        done.set()
        reader.join()
    assert errors == []
    assert seen and all(count % 10 == 0 for count in seen)


def test_tombstoned_chunk_is_gone_and_no_longer_counted(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    with writer.update() as update:
        update.add([_record(1, "zebra stripes"), _record(2, "zebra crossing"), _record(3, "horse")])
    with writer.update() as update:
        assert update.tombstone([2, 99]) == 1
    index = SearchIndex(tmp_path, Analyzer())
    assert [h.chunk_id for h in index.search("zebra", repo=None)] == [1]
    assert index.df(["zebra", "cross", "hors"]) == {"zebra": 1, "cross": 0, "hors": 1}  # terms
    assert index.snapshot().live_docs == 2


def _corrupt_index(tmp_path: Path) -> IndexWriter:
    writer = IndexWriter(tmp_path, Analyzer())
    with writer.update() as update:
        update.add([_record(1, "some words here")])
    return writer


def test_truncated_or_foreign_segment_file_is_reported_corrupt(tmp_path: Path) -> None:
    _corrupt_index(tmp_path)
    segment = next(tmp_path.glob("seg-*"))
    whole = segment.read_bytes()
    for damaged, message in (
        (whole[: len(whole) - 100], "past the end"),
        (b"\x93NUMPY garbage" + whole[16:], "not a segment file"),
        (whole[:10], "truncated"),
        (whole[:16] + b"{not json" + whole[25:], "header unreadable"),
    ):
        segment.write_bytes(damaged)
        with pytest.raises(IndexCorrupt, match=message):
            SearchIndex(tmp_path, Analyzer()).search("words", repo=None)


def test_garbled_manifest_and_missing_segment_are_reported_corrupt(tmp_path: Path) -> None:
    _corrupt_index(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["segments"][0]["name"] = "seg-missing"
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IndexCorrupt, match="missing"):
        SearchIndex(tmp_path, Analyzer()).search("words", repo=None)
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(IndexCorrupt, match="not valid JSON"):
        SearchIndex(tmp_path, Analyzer()).search("words", repo=None)


def test_index_built_with_another_analysis_must_be_rebuilt(tmp_path: Path) -> None:
    _corrupt_index(tmp_path)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["analysis"]["n_features"] = 2**18
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IndexIncompatible, match="reindex"):
        SearchIndex(tmp_path, Analyzer()).search("words", repo=None)


def test_rebuild_replaces_a_corrupt_index(tmp_path: Path) -> None:
    writer = _corrupt_index(tmp_path)
    (tmp_path / MANIFEST).write_text("{not json")
    writer.rebuild(
        [[_record(1, "some words here"), _record(2, "more words")]], catch_up=lambda: (2, {})
    )
    hits = SearchIndex(tmp_path, Analyzer()).search("words", repo=None)
    assert sorted(h.chunk_id for h in hits) == [1, 2]
    assert len(list(tmp_path.glob("seg-*"))) == 1  # the old segment was collected


def test_empty_or_stopword_only_queries_find_nothing(tmp_path: Path) -> None:
    writer = IndexWriter(tmp_path, Analyzer())
    with writer.update() as update:
        update.add([_record(1, "the words")])
    index = SearchIndex(tmp_path, Analyzer())
    assert index.search("", repo=None) == []
    assert index.search("the and of", repo=None) == []
    assert index.search("unknownterm", repo=None) == []
    assert index.search("words", repo=None, k=0) == []
    assert np.isclose(index.search("words", repo=None)[0].score, 1.0)
