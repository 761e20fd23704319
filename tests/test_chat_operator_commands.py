"""The short-issue path typed in Chat, as the README shows it: "what is #N waiting for?"
shows the task's question, "discuss #N" focuses the session on the issue, a Decision is
drafted there, "publish it" publishes it, and the task resumes to a pull request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.chat.operator_commands import Command, OperatorCommand, parse_command
from tests.test_dev_demo_loop import Dev, _page, _start, _stop, _until


def test_commands_are_whole_messages_in_the_operators_words() -> None:
    assert parse_command("discuss #15") == OperatorCommand(Command.DISCUSS, 15)
    assert parse_command("Let's discuss issue #7.") == OperatorCommand(Command.DISCUSS, 7)
    assert parse_command("publish it") == OperatorCommand(Command.PUBLISH)
    assert parse_command("OK, publish the decision!") == OperatorCommand(Command.PUBLISH)
    assert parse_command("what is #15 waiting for?") == OperatorCommand(Command.WAITING_FOR, 15)
    assert parse_command("What's issue #3 waiting on") == OperatorCommand(Command.WAITING_FOR, 3)
    # A sentence that merely mentions them is not a command.
    for text in (
        "should we publish it tomorrow?",
        "discuss #15 and then file a new issue",
        "we could discuss #15",
        "what is #15",
    ):
        assert parse_command(text) is None, text


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    running = _start(tmp_path)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            _stop(running)


@pytest.mark.slow
def test_the_short_issue_path_works_as_typed(dev: Dev) -> None:
    filed = dev.chat("file an issue for the flaky login test")
    number = filed["filed_issue_number"]
    session = filed["session"]
    dev.wait_for(number, "waiting_for_info")
    asked = dev.chat(f"what is #{number} waiting for?", session=session)
    assert f"#{number} is waiting_for_info, waiting for an answer to:" in asked["reply"]
    assert "less than a sentence" in asked["reply"]  # the task's question, as it asked it
    assert "Session memory" not in asked["reply"]  # the record answers, memory is not weighed
    # Nothing drafted yet: "publish it" says how, and publishes nothing.
    early = dev.chat("publish it", session=session)
    assert "Nothing to publish" in early["reply"]
    opened = dev.chat(f"discuss #{number}", session=session)
    assert f"Discussing #{number} in this session" in opened["reply"]
    assert "Its task asks: " in opened["reply"] and "less than a sentence" in opened["reply"]
    sessions = dev.call("GET", "/api/operator/chat/sessions")["sessions"]
    assert next(s for s in sessions if s["id"] == session)["focus"] == number
    drafted = dev.chat(
        "draft a decision: retry the login step twice and log the failing selector",
        session=session,
    )
    assert drafted["intent"] == "decide" and drafted["decision_body"], drafted
    published = dev.chat("publish it", session=session)
    assert f"Published the Decision on #{number}: " in published["reply"]
    link = published["reply"].rsplit(": ", 1)[1].split()[0]
    comment = _page(link)
    assert "retry the login step twice" in comment
    assert "published by operator" in comment and "dev" in comment  # who, not only the bot
    task = dev.wait_for(number, "delivered")
    assert "retry the login step twice" in _page(task["pr_url"])

    # The issue's labels follow the task: delivered, and no queued label left behind.
    def delivered_page() -> str | None:
        page = _page(filed["filed_issue_url"])
        return page if "steelframe:delivered" in page else None

    issue = _until(delivered_page, "the delivered label", dev)
    assert "steelframe:queued" not in issue and "steelframe:needs_human" not in issue
    # Published once: the draft is gone, so a second "publish it" posts nothing more.
    again = dev.chat("publish it", session=session)
    assert "Nothing to publish" in again["reply"]
