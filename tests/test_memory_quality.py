"""Retrieval quality on a labelled set: a faster index must not quietly rank worse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.chat.retrieval import CHAT_FLOOR
from bot.db import Database, upgrade
from memory import ChunkIn, Memory

DATA = Path(__file__).parent / "data" / "memory_quality.json"
LABELLED = json.loads(DATA.read_text())


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("quality")
    database = Database.from_url(f"sqlite:///{folder / 'steelframe.db'}")
    upgrade(database.engine)
    memory = Memory(folder / "memory", database.session)
    keys: dict[int, str] = {}
    for chunk in LABELLED["chunks"]:
        added = memory.add(
            [
                ChunkIn(
                    chunk["text"],
                    chunk["source"],
                    chunk.get("repo", "acme/app"),
                    issue=chunk.get("issue"),
                    session_id=chunk.get("session_id"),
                    paths=chunk.get("paths", ()),
                    key=chunk["key"],
                )
            ]
        )
        keys[added[0].id] = chunk["key"]
    yield memory, keys
    database.dispose()


@pytest.mark.parametrize("case", LABELLED["queries"], ids=lambda c: c["first"])
def test_labelled_query_ranks_its_chunk_first_above_the_floor(
    seeded: Any, case: dict[str, str]
) -> None:
    memory, keys = seeded
    hits = memory.search(case["query"], repo="acme/app", k=3)
    assert hits, f"no hits for {case['query']!r}"
    assert keys[hits[0].chunk_id] == case["first"]
    assert hits[0].score >= CHAT_FLOOR


@pytest.mark.parametrize("question", LABELLED["unrelated"])
def test_unrelated_question_keeps_every_hit_below_the_floor(seeded: Any, question: str) -> None:
    memory, _ = seeded
    assert memory.search(question, repo="acme/app", k=5, floor=CHAT_FLOOR) == []


def test_other_repositories_chunks_are_not_returned(seeded: Any) -> None:
    memory, keys = seeded
    hits = memory.search("infra deploy terraform state locking", repo="acme/app", k=8)
    assert "other-repo-deploy" not in {keys[h.chunk_id] for h in hits}
    everywhere = memory.search("infra deploy terraform state locking", repo=None, k=1)
    assert keys[everywhere[0].chunk_id] == "other-repo-deploy"
