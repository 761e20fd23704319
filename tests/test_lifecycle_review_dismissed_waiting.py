"""A review whose thread waits on an operator's question, then dismissed on GitHub: its
thread is declined as dismissed, as any dismissed thread is (it was left waiting), and the
question, only about that review, no longer holds the task."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from sqlalchemy import select

from bot.lifecycle.models import ReviewThread, ThreadState
from bot.lifecycle.reviews import DISMISSED
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull


async def test_a_thread_waiting_on_a_question_is_declined_when_its_review_is_dismissed(
    make: Make, tmp_path: Path
) -> None:
    lc = await make(coding_command=command("review", "ask"))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    review = {"body": "Please use a calmer blue.", "event": "REQUEST_CHANGES", "commit_id": head}
    made = await as_person(lc, "maintainer", "POST", f"/pulls/{number}/reviews", review)
    await lc.work()
    assert lc.task(issue).state == "waiting_for_info"
    path = f"/_sandbox/repos/{lc.repo}/pulls/{number}/reviews/{made['id']}/dismissals"
    async with aiohttp.ClientSession() as http:
        response = await http.post(
            lc.sandbox.url + path,
            json={"by": "maintainer", "message": "Wrong pull request."},
            headers=lc.sandbox.control_headers,
        )
        assert response.status == 200, await response.text()
    await lc.settle()
    (thread,) = lc.ctx.db.call(
        lambda s: list(s.scalars(select(ReviewThread).where(ReviewThread.task_id == task_id)))
    )
    assert (thread.state, thread.reason) == (ThreadState.DECLINED, DISMISSED)
    task = lc.task(issue)
    assert (task.state, task.question) == ("delivered", None)
    assert await lc.labels(issue) >= {"steelframe:delivered"}
    last = lc.events(task_id)[-1]
    assert (last.to_state, last.actor) == ("delivered", "webhook:pull_request_review.dismissed")
    assert f"review:{made['id']}" in last.detail and "moot" in last.detail
