"""General vocabulary and the installation's own words (issue 31): the related-term table is
domain-neutral; a repository's domain words come from its own memory (threads that share
words) and from an optional `related:` table in its committed memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.chat.retrieval import MemoryGrounder
from bot.config import AgentConfig
from bot.contracts.chat import Frame
from bot.db import Database, upgrade
from memory import ChunkIn, Memory
from memory.committed import read_related
from memory.related import GROUPS

REPO = "steelframe-dev/sandbox"
NOISE = [
    ChunkIn(f"#{n} {topic} needs a review\n\nSee the {topic} notes.", "issue", REPO, issue=n)
    for n, topic in enumerate(
        ["login page", "export job", "billing page", "search box", "release notes", "footer"],
        start=100,
    )
]


@pytest.fixture
def memory(sqlite_url: str, tmp_path: Path) -> Iterator[Memory]:
    database = Database.from_url(sqlite_url)
    upgrade(database.engine)
    yield Memory(tmp_path / "memory", database.session)
    database.dispose()


@pytest.fixture
def agent(tmp_path: Path) -> AgentConfig:
    (tmp_path / "checkout").mkdir(exist_ok=True)
    return AgentConfig("default", REPO, tmp_path / "checkout", "offline")


async def _emit(frame: Frame) -> None:
    return None


def test_the_default_table_names_no_ones_domain() -> None:
    words = set(GROUPS.replace(",", " ").split())
    bookkeeping = {"invoice", "vat", "iban", "ledger", "dunning", "ustva", "refund", "hotmail"}
    assert not words & bookkeeping
    assert {"deploy", "rollback", "backup", "flaky", "timeout"} <= words


async def test_a_committed_related_table_bridges_the_projects_own_words(
    memory: Memory, agent: AgentConfig
) -> None:
    memory.add(
        [
            *NOISE,
            ChunkIn(
                "#15 EMQX drops every connection at 03:00 UTC\n\nAll three nodes at once.",
                "issue",
                REPO,
                issue=15,
            ),
        ]
    )
    question = "Why does the hub kick every gadget off each night?"
    before = await MemoryGrounder(memory).ground(
        query=question, agent=agent, focus=None, emit=_emit
    )
    assert 15 not in [h.issue for h in before.kept_hits]
    folder = agent.checkout / "docs" / "memory"
    folder.mkdir(parents=True)
    (folder / "related.yml").write_text(
        "related:\n  - hub, emqx, broker\n  - kick off, drop, disconnect\n  - 42\n"
    )
    assert read_related(agent.checkout) == ("hub, emqx, broker", "kick off, drop, disconnect")
    after = await MemoryGrounder(memory).ground(query=question, agent=agent, focus=None, emit=_emit)
    assert after.kept_hits[0].issue == 15
    assert {"emqx", "drop"} <= set(after.meta["rounds"][0]["related_terms"])


def test_a_broken_related_table_is_no_table(tmp_path: Path) -> None:
    folder = tmp_path / "docs" / "memory"
    folder.mkdir(parents=True)
    (folder / "related.yml").write_text("related: [unclosed\n")
    assert read_related(tmp_path) == ()
    (folder / "related.yml").write_text("- just a list\n")
    assert read_related(tmp_path) == ()


def test_domain_words_are_learned_from_threads_that_share_them(memory: Memory) -> None:
    threads = [
        ChunkIn(f"#{n} Kestrel telemetry lags on gateway {n}", "issue", REPO, issue=n)
        for n in (1, 2, 3)
    ]
    others = [
        ChunkIn(f"#{n} {topic} is slow", "issue", REPO, issue=n)
        for n, topic in enumerate(["login", "export", "search", "footer", "billing"], start=4)
    ]
    memory.add([*threads, *others, *NOISE])
    found, grown = memory.related_search("is kestrel healthy?", repo=REPO, k=5)
    assert "telemetri" in grown.added  # learned: kestrel and telemetry share their threads
    assert {h.record.issue for h in found[:3]} == {1, 2, 3}
    # another repository learns its own words, not these
    _, elsewhere = memory.related_search("is kestrel healthy?", repo="other/repo", k=5)
    assert "telemetri" not in elsewhere.added
