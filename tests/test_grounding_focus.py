"""Focus ranks within the thread (issue 31): in a Discuss session the question says which
part of the focused thread answers it; that part comes first in the focus context, and the
issue's own text and its latest Decision are always in view."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.chat.retrieval import MemoryGrounder
from bot.chat.thread_focus import Asked, asked_for
from bot.config import AgentConfig
from bot.contracts.chat import Frame
from bot.db import Database, upgrade
from memory import ChunkIn, Memory

REPO = "steelframe-dev/sandbox"
THREAD = [
    ("issue", "#11 Devices reboot-loop after 4.2.0 when flash is nearly full\n\nThey loop.", 11),
    ("comment", "@bea on #11:\nesp_ota_end returns ESP_ERR_OTA_VALIDATE_FAILED.", 11),
    (
        "worker_session",
        "Worker session for o/r#11 (task 1, attempt 1): failed\nTried heatshrink compression.",
        11,
    ),
    (
        "worker_session",
        "Worker session for o/r#11 (task 1, attempt 2): delivered\nAdded a preflight check.",
        11,
    ),
    ("comment", "@steelframe[bot] on #11:\nDecision: stay on 4.1.x until delta updates.", 11),
    ("pull_request", "PR #24 Preflight: refuse updates without free flash\n\nFixes #11", 24),
    ("comment", "@oskar on #11:\n4.2.1 reached all rings on 2025-06-02; no loops since.", 11),
]
OTHER = [
    ("issue", f"#{n} {topic} is flaky\n\nSeen twice this week.", n)
    for n, topic in [(30, "login"), (31, "export"), (32, "search"), (33, "footer")]
]


@pytest.fixture
def memory(sqlite_url: str, tmp_path: Path) -> Iterator[Memory]:
    database = Database.from_url(sqlite_url)
    upgrade(database.engine)
    memory = Memory(tmp_path / "memory", database.session)
    memory.add([ChunkIn(text, source, REPO, issue=n) for source, text, n in [*THREAD, *OTHER]])
    yield memory
    database.dispose()


@pytest.fixture
def agent(tmp_path: Path) -> AgentConfig:
    (tmp_path / "checkout").mkdir(exist_ok=True)
    return AgentConfig("default", REPO, tmp_path / "checkout", "offline")


async def _emit(frame: Frame) -> None:
    return None


async def _context(memory: Memory, agent: AgentConfig, question: str) -> list[str]:
    grounding = await MemoryGrounder(memory).ground(
        query=question, agent=agent, focus=11, emit=_emit
    )
    return [h.text for h in grounding.hits if h.round == "focus" and h.strength == "context"]


def test_what_a_question_asks_of_the_thread() -> None:
    assert asked_for("What did the worker try first?") == {Asked.WORKER}
    assert Asked.FIX in asked_for("Which pull request fixed this?")
    assert asked_for("What did the operator decide here?") == {Asked.DECISION}
    assert asked_for("Where does this stand now?") == {Asked.STATUS}
    assert asked_for("Is it done?") == {Asked.STATUS}
    assert asked_for("Why does it loop?") == set()


@pytest.mark.parametrize(
    ("question", "first"),
    [
        ("What did the worker try first?", "attempt 1"),
        ("What did the worker do?", "attempt 2"),
        ("Which pull request fixed this?", "PR #24"),
        ("What did the operator decide here?", "Decision: stay"),
        ("Where does this stand now?", "reached all rings"),
    ],
)
async def test_the_part_of_the_thread_the_question_asks_for_leads(
    memory: Memory, agent: AgentConfig, question: str, first: str
) -> None:
    context = await _context(memory, agent, question)
    assert first in context[0]


@pytest.mark.parametrize("question", ["Why does it loop?", "What did the worker try first?"])
async def test_the_issue_and_its_latest_decision_are_always_in_view(
    memory: Memory, agent: AgentConfig, question: str
) -> None:
    context = await _context(memory, agent, question)
    assert any(text.startswith("#11 Devices reboot-loop") for text in context)
    assert any("Decision: stay" in text for text in context)
