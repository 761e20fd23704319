"""Chat's "forget ..." operator command over a real Memory: the imperative forgets and says
which chunks (never their text); a question, or a sentence that merely mentions forgetting,
forgets nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.chat.intents import DraftOnlyPolicy, IntentContext
from bot.chat.operator_commands import (
    Command,
    OperatorCommand,
    OperatorCommands,
    answered_by_record,
    parse_command,
)
from bot.chat.session_store import TurnSession
from bot.chat.task_reader import TaskReader
from bot.config import AgentConfig
from bot.db import Database, upgrade
from bot.dialogue.trailer import Intent, Trailer
from memory import ChunkIn, ChunkSource, Memory

REPO = "acme/app"


def test_forget_is_an_imperative_whole_message() -> None:
    assert parse_command("forget #12") == OperatorCommand(Command.FORGET, issue=12)
    assert parse_command("Please forget everything about issue #7.") == OperatorCommand(
        Command.FORGET, issue=7
    )
    assert parse_command("forget comment:4567") == OperatorCommand(
        Command.FORGET, key="comment:4567"
    )
    assert parse_command("forget the key `issue:acme/app#3`!") == OperatorCommand(
        Command.FORGET, key="issue:acme/app#3"
    )
    assert parse_command('Forget that "the staging password is tangerine".') == OperatorCommand(
        Command.FORGET, words="the staging password is tangerine"
    )
    assert answered_by_record("forget #12")  # the record answers; memory is not weighed
    for text in (
        "forget #12?",
        "should we forget #12?",
        "can you forget that the staging password is tangerine?",
        "don't forget that deploys run on Fridays",
        "I forget what #12 was about",
        "forget that",
        "forget it",
    ):
        assert parse_command(text) is None, text


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    database = Database.from_url(f"sqlite:///{tmp_path / 'steelframe.db'}")
    upgrade(database.engine)
    memory = Memory(tmp_path / "memory", database.session)
    memory.add(
        [
            ChunkIn("the staging password is tangerine", ChunkSource.COMMENT, REPO, 4, key="c:1"),
            ChunkIn("tangerine is the release name", ChunkSource.ISSUE, REPO, 4, key="i:4"),
            ChunkIn("the staging password is tangerine", ChunkSource.NOTE, "acme/other"),
            ChunkIn("the staging host is slow", ChunkSource.NOTE, REPO, 9),
        ]
    )
    yield memory
    database.dispose()


async def _turn(memory: Memory | None, message: str, intent: Intent = Intent.ANSWER) -> Any:
    async def nothing(repo: str, issue: int) -> None:
        return None

    commands = OperatorCommands(
        DraftOnlyPolicy(),
        tasks=TaskReader(focused=nothing, left=nothing),
        publisher=None,
        memory=memory,
    )
    session = TurnSession("s1", "default", None, None, "chat", None, None)
    agent = AgentConfig("default", REPO, Path("."), "offline")
    return await commands.apply(IntentContext(1, "t1", message, Trailer(intent), session, agent))


def _found(memory: Memory, query: str) -> list[str]:
    return [h.record.text for h in memory.search(query, repo=None, floor=0.0)]


async def test_forget_that_forgets_the_chunks_that_say_it_and_names_them_not_their_text(
    memory: Memory,
) -> None:
    outcome = await _turn(memory, "forget that The staging password is tangerine")
    assert outcome.reply_suffix == (
        '\n\nForgotten from session memory (saying "The staging password is tangerine"):\n'
        "- chunk 1 (comment on #4, key c:1)"
    )
    assert sorted(_found(memory, "staging password tangerine")) == [
        "tangerine is the release name",
        "the staging host is slow",
        "the staging password is tangerine",  # another repository's: not this agent's
    ]
    again = await _turn(memory, "forget that the staging password is tangerine")
    assert "Nothing in session memory saying" in again.reply_suffix


async def test_forget_an_issue_or_a_key_says_what_it_forgot(memory: Memory) -> None:
    outcome = await _turn(memory, "forget #4")
    assert outcome.reply_suffix.endswith(
        "(about #4):\n- chunk 1 (comment on #4, key c:1)\n- chunk 2 (issue on #4, key i:4)"
    )
    missing = await _turn(memory, "forget i:4")
    assert missing.reply_suffix.endswith(
        "Nothing in session memory under the key i:4 in acme/app: nothing forgotten."
    )


async def test_a_question_about_forgetting_forgets_nothing(memory: Memory) -> None:
    for message in ("should we forget #4?", "forget #4?", "can you forget that tangerine?"):
        outcome = await _turn(memory, message, Intent.FILE_MEMORY)
        assert "Forgotten" not in outcome.reply_suffix, message
    assert len(_found(memory, "tangerine")) == 3


async def test_forget_that_with_too_few_words_or_too_many_chunks_forgets_nothing(
    memory: Memory,
) -> None:
    short = await _turn(memory, "forget that staging")
    assert short.reply_suffix.startswith("\n\nNothing forgotten: say more")
    memory.add([ChunkIn(f"deploy note number {i}", ChunkSource.NOTE, REPO) for i in range(11)])
    broad = await _turn(memory, "forget that deploy note number")
    assert "more than 10 chunks say that; nothing was forgotten" in broad.reply_suffix
    assert len(memory.search("deploy note number", repo=REPO, k=20)) == 11
    unavailable = await _turn(None, "forget #4")
    assert "session memory is not available" in unavailable.reply_suffix
