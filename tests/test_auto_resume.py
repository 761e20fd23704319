"""Auto-resume from a past Decision (issue 34), only where the repository allows it
(`decisions.auto_resume` in `.steelframe/config.yml`): a question like one a standing
Decision answered is answered by that Decision, published by Steelframe with the comment
saying which Decision it reused, and the task resumes as with any Decision; once per
question, however often it is asked to. Real service, GitHub sandbox, RQ worker; the
choice itself on SQLite and PostgreSQL. Never by default: tests/test_decision_drafts.py."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.db import Database
from bot.decisions import publish_key
from bot.idempotency import SideEffect
from bot.lifecycle import auto_resume
from bot.lifecycle.models import EventKind
from bot.lifecycle.repo_config import Decisions, RepoConfigError, parse
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.decisions import answered
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import DECISION, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

ALLOW = "decisions:\n  auto_resume: true\n  min_score: 0.9\n"


async def test_a_question_answered_before_is_answered_by_that_decision_and_resumes(
    make: Make,
) -> None:
    lc = await make(coding_command=command("question"))
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, {".steelframe/config.yml": ALLOW})
    first = await lc.open_issue("Add a cache")
    await lc.work()  # asks "Should the cache use Redis or SQLite?": nothing to reuse yet
    assert lc.task(first).state == TaskState.WAITING_FOR_INFO
    await lc.comment_as("maintainer", first, f"{DECISION}\nUse SQLite.", "write")
    await lc.work()
    assert lc.task(first).state == TaskState.DELIVERED

    second = await lc.open_issue("Add a cache to the importer")
    await lc.work()  # the same question: answered by the Decision of the first issue
    await lc.work()  # the continuation it resumed
    task = lc.task(second)
    assert task.state == TaskState.DELIVERED
    (published,) = [c for c in await lc.comments(second) if DECISION in c["body"]]
    body = published["body"]
    assert body.split(DECISION, 1)[1].strip().startswith("Use SQLite.")
    assert f"#{first} ({lc.decision_recorded_at(first):%Y-%m-%d})" in body and "auto_resume" in body
    assert await lc.github.is_app_login(published["user"]["login"])
    answer = lc.branch_file("ANSWER.md", task.branch or "") or ""
    assert "decision: Use SQLite." in answer  # the run was told the reused Decision
    assert [e.kind for e in lc.events(task.id)].count(EventKind.DECISION) == 1

    # Asked again for the same question (a redelivered job, a repeated hook): the same
    # comment answers, nothing new is posted and the task is not resumed twice.
    asked = next(e for e in lc.events(task.id) if e.to_state == TaskState.WAITING_FOR_INFO)
    question = auto_resume.Question(task.id, lc.repo, second, asked.id, str(asked.data["question"]))
    again = await auto_resume.reuse(lc.ctx, lc.github, question, Decisions(auto_resume=True))
    assert again is not None and again.reused and again.comment_id == published["id"]
    await lc.settle()
    assert len([c for c in await lc.comments(second) if DECISION in c["body"]]) == 1
    assert [e.kind for e in lc.events(task.id)].count(EventKind.DECISION) == 1
    assert lc.task(second).state == TaskState.DELIVERED


def test_only_a_standing_decision_above_the_threshold_is_reused(any_db: Database) -> None:
    db = any_db  # SQLite and PostgreSQL
    day = datetime(2026, 11, 1, tzinfo=UTC)
    tenant = "Which tenant keeps the old export format?"

    def history(session: Session) -> None:
        answered(session, "o/r", 1, tenant, "Acme keeps it.", day)
        answered(session, "o/r", 2, tenant, "Nobody keeps it any more.", day + timedelta(1))
        answered(session, "o/r", 3, "May I add a dependency on lxml?", "Yes.", day)

    db.call(history)

    def asked(text: str) -> auto_resume.Question:
        return auto_resume.Question(0, "o/r", 9, 0, text)

    # The same question: the Decision that stands, never the one it reversed.
    found = db.call(auto_resume.choice, asked(tenant), 0.9)
    assert found is not None and found.past.decision == "Nobody keeps it any more."
    said = auto_resume.comment(found, 0.9)
    assert "#2 (2026-11-02)" in said and "auto_resume" in said
    # A question only somewhat alike is offered as a draft, but not reused.
    somewhat = "Which tenant should keep the old export format after the migration?"
    assert db.call(auto_resume.choice, asked(somewhat), 0.9) is None
    assert db.call(auto_resume.choice, asked("Rename the CLI flag?"), 0.9) is None


def test_auto_resume_is_off_by_default_and_its_threshold_is_strict() -> None:
    assert parse("test: make test\n").decisions == Decisions(auto_resume=False, min_score=0.9)
    assert parse(ALLOW).decisions.auto_resume
    for wrong in ("decisions:\n  min_score: 0.5\n", "decisions:\n  auto_resum: true\n"):
        with pytest.raises(RepoConfigError, match="decisions"):
            parse(wrong)


async def test_a_question_asked_again_once_another_decision_stands_keeps_its_first_answer(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    """Auto-resume run again for a question it answered, after another issue's Decision came
    to stand for that question: the question's first answer stands (one per question), said
    so in one line, never a 422 logged as a failure nor a second Decision."""
    lc = await make(coding_command=command("question"))
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, {".steelframe/config.yml": ALLOW})
    first = await lc.open_issue("Add a cache")
    await lc.work()
    await lc.comment_as("maintainer", first, f"{DECISION}\nUse SQLite.", "write")
    await lc.work()
    second = await lc.open_issue("Add a cache to the importer")
    await lc.work()  # answered by the Decision of the first issue
    task = lc.task(second)
    (published,) = [c for c in await lc.comments(second) if DECISION in c["body"]]
    asked = next(e for e in lc.events(task.id) if e.to_state == TaskState.WAITING_FOR_INFO)
    question = auto_resume.Question(task.id, lc.repo, second, asked.id, str(asked.data["question"]))
    later = datetime.now(UTC) + timedelta(days=1)
    lc.ctx.db.call(lambda s: answered(s, lc.repo, 900, question.text, "Use Redis.", later))
    now_best = lc.ctx.db.call(auto_resume.choice, question, 0.9)
    assert now_best is not None and now_best.past.decision == "Use Redis."  # another choice

    policy = Decisions(auto_resume=True)
    with caplog.at_level(logging.INFO, logger=auto_resume.__name__):
        again = await auto_resume.reuse(lc.ctx, lc.github, question, policy)
    assert again is not None and again.reused and again.comment_id == published["id"]
    assert "already answered" in caplog.text and "failed" not in caplog.text
    # The first publish stopped before it recorded its comment (a crash): still no second.
    key = publish_key(auto_resume.NO_OPERATOR, lc.repo, second, auto_resume.answer_key(question))
    lc.ctx.db.call(lambda s: _unfinished(s, key))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=auto_resume.__name__):
        assert await auto_resume.reuse(lc.ctx, lc.github, question, policy) is None
    assert "has not finished" in caplog.text and "failed" not in caplog.text
    await lc.settle()
    assert len([c for c in await lc.comments(second) if DECISION in c["body"]]) == 1
    assert [e.kind for e in lc.events(task.id)].count(EventKind.DECISION) == 1


def _unfinished(session: Session, key: str) -> None:
    """The side effect under `key` as a publish that stopped before recording its result."""
    row = session.scalar(select(SideEffect).where(SideEffect.key == key))
    assert row is not None and row.status == "done"
    row.status, row.result, row.lease_until = "pending", None, None
