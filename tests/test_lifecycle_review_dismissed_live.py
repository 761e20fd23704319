"""A review dismissed on GitHub while its review run works, and the dismissal webhook lost:
the run reads the review's state from GitHub before it replies (it asked only its own
ledger, so the answer went to a dismissed review); a run whose question was only about
dismissed reviews asks nothing and the task goes back to where it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from sqlalchemy import select

from bot.lifecycle.models import ReviewThread, ThreadState
from bot.lifecycle.reviews import DISMISSED
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir


async def _request_changes(lc: Lifecycle, number: int) -> int:
    """A maintainer asks for changes on the pull request; the review's id."""
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    review = {"body": "Please use a calmer blue.", "event": "REQUEST_CHANGES", "commit_id": head}
    made = await as_person(lc, "maintainer", "POST", f"/pulls/{number}/reviews", review)
    return int(made["id"])


async def dismiss_unheard(lc: Lifecycle, number: int, review_id: int) -> None:
    """The maintainer dismisses the review on GitHub; its webhook never reaches Steelframe
    (the delivery fails: no receiver), as a lost delivery would."""
    hooks = lc.sandbox.sandbox.hooks
    url, secret = hooks.url, hooks.secret
    hooks.configure(None, secret)
    path = f"/_sandbox/repos/{lc.repo}/pulls/{number}/reviews/{review_id}/dismissals"
    async with aiohttp.ClientSession() as http:
        response = await http.post(
            lc.sandbox.url + path,
            json={"by": "maintainer", "message": "Wrong pull request."},
            headers=lc.sandbox.control_headers,
        )
        assert response.status == 200, await response.text()
        assert (await response.json())["state"] == "DISMISSED"
    await lc.settle()
    hooks.configure(url, secret)
    (sent,) = [d for d in hooks.sent if (d.event, d.action) == ("pull_request_review", "dismissed")]
    assert sent.status is None and sent.error  # never delivered


def _threads(lc: Lifecycle, task_id: int) -> list[ReviewThread]:
    return list(
        lc.ctx.db.call(
            lambda s: list(s.scalars(select(ReviewThread).where(ReviewThread.task_id == task_id)))
        )
    )


async def _answers(lc: Lifecycle, number: int) -> list[str]:
    return [c["body"] for c in await lc.comments(number) if "steelframe-thread-answer" in c["body"]]


async def test_a_review_dismissed_with_its_webhook_lost_gets_no_answer(
    make: Make, tmp_path: Path
) -> None:
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review", "fix", started, go))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    review_id = await _request_changes(lc, number)
    working = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=120)  # the review run took the thread up
    await dismiss_unheard(lc, number, review_id)
    go.write_text("go")
    await working
    assert await _answers(lc, number) == []
    (thread,) = _threads(lc, task_id)
    assert (thread.state, thread.reason) == (ThreadState.DECLINED, DISMISSED)
    assert lc.task(issue).state == "delivered"


async def test_a_question_only_about_dismissed_reviews_is_not_asked(
    make: Make, tmp_path: Path
) -> None:
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review_question", started, go))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    review_id = await _request_changes(lc, number)
    working = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=120)
    await dismiss_unheard(lc, number, review_id)
    go.write_text("go")
    await working
    task = lc.task(issue)
    assert (task.state, task.question) == ("delivered", None)
    assert await _answers(lc, number) == []
    issue_comments = [c["body"] for c in await lc.comments(issue)]
    assert not any("Which blue did the reviewer mean?" in body for body in issue_comments)
    last = lc.events(task_id)[-1]
    assert (last.from_state, last.to_state) == ("running", "delivered")
    assert "moot" in last.detail and f"review:{review_id}" in last.detail
