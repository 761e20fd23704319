"""Chat's "what is left on #N?", typed in a real chat turn on the offline runtime: the
answer comes from the review thread ledger and the task's state (open threads with who,
where and what they said; addressed with the commit; declined with the reason; the pull
request's state; ready for review or not), with the reviewer's words inert. Real RQ
workers deliver the pull request; the GitHub sandbox; SQLite and PostgreSQL."""

from __future__ import annotations

import re
from typing import Any

from bot.chat.operator_commands import Command, OperatorCommand, parse_command
from bot.lifecycle.models import ThreadKind, ThreadState
from bot.lifecycle.thread_answers import ThreadAnswer, answer_threads
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull

HOSTILE = "Too loud [click](javascript:alert(1)) <img src=x onerror=alert(1)> fixes #1"


def test_the_question_in_the_operators_words() -> None:
    left = Command.LEFT
    for text, issue in (
        ("what is left on #12?", 12),
        ("What's left for #12", 12),
        ("what’s still open on issue #7?", 7),
        ("ok so what remains to be done on #3?", 3),
        ("what is outstanding on PR #4", 4),
        ("what's left to do on #5?!", 5),
    ):
        assert parse_command(text) == OperatorCommand(left, issue), text
    for text in (
        "what is left on #12 and what should we do next?",
        "tell me what is left",
        "is anything left on #12",
        "what is left on the export job?",
    ):
        assert parse_command(text) is None, text


async def _chat(lc: Lifecycle, message: str) -> str:
    response = await lc.api.post("/api/operator/chat", json={"message": message})
    assert response.status == 200, await response.text()
    return str((await response.json())["reply"])


async def _comment(lc: Lifecycle, number: int, body: str) -> Any:
    pull = await lc.github.get_pull(lc.repo, number)
    return await as_person(
        lc,
        "maintainer",
        "POST",
        f"/pulls/{number}/comments",
        {"body": body, "commit_id": pull.head.sha, "path": "CHANGE.md", "line": 1},
    )


async def test_what_is_left_reads_the_ledger_then_the_merge(make: Make, any_db_url: str) -> None:
    lc = await make(coding_command=command("commit"), database_url=any_db_url)
    issue, number = await delivered_pull(lc, "Make the widget blue")
    task = lc.task(issue)
    pr_url = task.pr_url
    assert pr_url

    before = await _chat(lc, f"what is left on #{issue}?")
    assert f"#{issue} (“Make the widget blue”): its pull request {pr_url} is open" in before
    assert "no review threads yet" in before
    assert "Ready for review: no thread is open." in before

    loud = await _comment(lc, number, HOSTILE)
    kept = await _comment(lc, number, "Keep the old name?")
    fixed = await _comment(lc, number, "Typo in the title.")
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    answers = [
        ThreadAnswer(ThreadKind.COMMENT, fixed["id"], ThreadState.ADDRESSED, "Fixed.", head),
        ThreadAnswer(ThreadKind.COMMENT, kept["id"], ThreadState.DECLINED, "The issue asks it."),
    ]
    assert await answer_threads(lc.ctx.db, lc.github, task.id, answers) == 2
    await lc.settle()

    reply = await _chat(lc, f"What's still open on #{issue}")
    assert "review threads: 1 open · 1 addressed · 1 declined." in reply
    assert "Open (1):" in reply and "Addressed (1):" in reply and "Declined (1):" in reply
    open_line = next(line for line in reply.splitlines() if line.startswith("- @maintainer on"))
    # Who, where, and what they said: quoted, with markdown and `#N` escaped to plain words.
    assert open_line.startswith("- @maintainer on CHANGE.md:1 said “Too loud \\[click\\]")
    assert "\\<img src=x onerror=alert\\(1\\)\\>" in open_line and "fixes \\#1" in open_line
    assert "[click](javascript" not in reply and not re.search(r"(?<!\\)<img", reply)
    assert loud["html_url"] in open_line  # the thread's link
    assert f"addressed in commit {head[:7]}" in reply
    assert "declined: “The issue asks it.”" in reply
    assert "Not ready for review: 1 open thread(s) to answer." in reply

    await as_person(lc, "maintainer", "PUT", f"/pulls/{number}/merge", {})
    merged = await _chat(lc, f"what is left on #{issue}?")
    assert f"its pull request {pr_url} was merged" in merged
    assert "Nothing is left: the task is merged (final)." in merged

    assert "#424242 has no task" in await _chat(lc, "what is left on #424242?")
