"""Which Decision comments resume a waiting task when they carry a status marker too
(bot/lifecycle/resume.py): a marked comment is Steelframe's own only when the App wrote it
(as tests/test_marked_comments_of_others.py holds everywhere else). A Decision that quotes
a progress or notice marker, from a writer or published by the App, is still a Decision;
a stranger's comment laid out as a notice is the stranger's, refused (and recorded) as
their Decision; the App's own notice is never a Decision, whatever it quotes. Real RQ
workers, the GitHub sandbox, the service."""

from __future__ import annotations

from bot.lifecycle.models import EventKind
from bot.lifecycle.progress import add_notice, notice_marker, post_notice, progress_marker
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def _waiting(make: Make) -> tuple[Lifecycle, int, int]:
    """A task that asked a question and waits for a Decision: (bench, issue, task id)."""
    lc = await make(coding_command=command("question"))
    issue = await lc.open_issue("Add a cache")
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO
    return lc, issue, task.id


def _decisions(lc: Lifecycle, task_id: int) -> list[EventKind]:
    kinds = (EventKind.DECISION, EventKind.DECISION_IGNORED)
    return [e.kind for e in lc.events(task_id) if e.kind in kinds]


async def test_a_writers_decision_quoting_the_progress_marker_resumes(make: Make) -> None:
    lc, issue, task_id = await _waiting(make)
    quoted = f"{DECISION}\nAs the status said:\n> {progress_marker(task_id)}\n\nUse SQLite."

    await lc.comment_as("maintainer", issue, quoted, "write")

    assert lc.task(issue).state == TaskState.RUNNING
    assert _decisions(lc, task_id) == [EventKind.DECISION]


async def test_a_published_decision_quoting_a_notice_marker_resumes(make: Make) -> None:
    lc, issue, task_id = await _waiting(make)
    body = f"The notice {notice_marker(task_id, 'question-1')} asked it: use SQLite."

    published = await lc.api.post(
        "/api/operator/chat/decision", json={"issue": issue, "body": body}
    )
    assert published.status == 200, await published.text()
    await lc.settle()

    assert lc.task(issue).state == TaskState.RUNNING
    assert _decisions(lc, task_id) == [EventKind.DECISION]


async def test_a_strangers_notice_shaped_decision_is_theirs_and_refused(make: Make) -> None:
    lc, issue, task_id = await _waiting(make)
    planted = f"{notice_marker(task_id, 'x')}\n{DECISION}\nUse Redis."

    await lc.comment_as("stranger", issue, planted, None)

    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    assert _decisions(lc, task_id) == [EventKind.DECISION_IGNORED]  # recorded as theirs


async def test_the_apps_own_notice_quoting_the_decision_marker_is_no_decision(
    make: Make,
) -> None:
    lc, issue, task_id = await _waiting(make)
    said = f"Publish a Decision (`{DECISION}`) to answer."
    lc.ctx.db.call(lambda s: add_notice(s, task_id, "how-to", said, lc.ctx.clock))
    await post_notice(lc.ctx.db, lc.github, task_id, "how-to", fresh=True)
    await lc.settle()

    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    assert _decisions(lc, task_id) == []
