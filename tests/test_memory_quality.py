"""Retrieval quality of the index itself on the labelled set (tests/data/grounding_set.json):
a faster or different index must not quietly rank worse. The chat turn's figures, with its
rounds, margin and labels, are in tests/test_grounding_quality.py."""

from __future__ import annotations

from typing import Any

import pytest

from bench.quality import (
    Outcome,
    chunk_items,
    load_set,
    ranked_outcomes,
    summary,
    tfidf_scorer,
)
from bot.chat.retrieval import STRONG_SCORE
from bot.db import Database, upgrade
from memory import ChunkIn, Memory

REPO = "tallyho/tallyho"
DATA = load_set()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("quality")
    database = Database.from_url(f"sqlite:///{folder / 'steelframe.db'}")
    upgrade(database.engine)
    memory = Memory(folder / "memory", database.session)
    items = chunk_items(DATA, REPO)
    added = memory.add([ChunkIn(**item) for item in items])
    keys = {a.id: item["key"] for a, item in zip(added, items, strict=True)}
    yield memory, keys
    database.dispose()


def _ours(memory: Memory, keys: dict[int, str]) -> list[Outcome]:
    outcomes = []
    for q in DATA["questions"]:
        hits = memory.search(q["question"], repo=REPO, focus=q["focus"], k=3)
        outcomes.append(Outcome(q, ranked=[keys[h.chunk_id] for h in hits]))
    return outcomes


def test_the_index_ranks_at_least_as_well_as_tfidf_vectorizer(seeded: Any) -> None:
    memory, keys = seeded
    ours = summary(_ours(memory, keys))
    tfidf = summary(ranked_outcomes(DATA, REPO, tfidf_scorer(DATA)))
    assert ours["answerable"][0] >= 0.72 * ours["answerable"][1]
    assert ours["answerable"][0] > tfidf["answerable"][0]  # stemming, identifiers, numbers
    assert ours["paraphrase_stem"][0] > tfidf["paraphrase_stem"][0]


def test_no_question_memory_cannot_answer_matches_it_strongly(seeded: Any) -> None:
    memory, _ = seeded
    for q in DATA["questions"]:
        if q["kind"] == "no-answer":
            hits = memory.search(q["question"], repo=REPO, k=5)
            assert all(h.score * h.coverage < STRONG_SCORE for h in hits), q["question"]


def test_other_repositories_chunks_are_not_returned(seeded: Any) -> None:
    memory, keys = seeded
    query = "terraform state locking with dynamodb"
    assert "other:infra-terraform" not in {
        keys[h.chunk_id] for h in memory.search(query, repo=REPO)
    }
    everywhere = memory.search(query, repo=None, k=1)
    assert keys[everywhere[0].chunk_id] == "other:infra-terraform"
