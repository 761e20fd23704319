"""A review dismissed on GitHub while its review run works: the run posts no answer to it,
and its thread says it was dismissed (it was only logged, and the run answered it)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.lifecycle.models import ReviewThread, ThreadState
from bot.lifecycle.reviews import DISMISSED
from github_sandbox.operations import HookEvent
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull
from tests.fakes.sandbox import exchange_dir


def _dismissal(submitted: dict[str, Any]) -> dict[str, Any]:
    """GitHub's `pull_request_review` dismissed for the review `submitted` names (octokit's
    schema: the same review, state `dismissed`). The sandbox has no dismissal operation."""
    dismissed = copy.deepcopy(submitted)
    dismissed["action"] = "dismissed"
    dismissed["review"]["state"] = "dismissed"
    return dismissed


async def test_a_review_dismissed_while_its_run_works_gets_no_answer(
    make: Make, tmp_path: Path
) -> None:
    # Where the held runtime may write (the coding sandbox hides the rest).
    started, go = exchange_dir(tmp_path) / "started", exchange_dir(tmp_path) / "go"
    lc = await make(coding_command=command("review", "fix", started, go))
    issue, number = await delivered_pull(lc)
    task_id = lc.task(issue).id
    head = (await lc.github.get_pull(lc.repo, number)).head.sha
    review = {"body": "Please use a calmer blue.", "event": "REQUEST_CHANGES", "commit_id": head}
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/reviews", review)
    hooks = lc.sandbox.sandbox.hooks
    (submitted,) = [
        d for d in hooks.sent if (d.event, d.action) == ("pull_request_review", "submitted")
    ]
    working = asyncio.ensure_future(lc.work())
    await wait_for(started.exists, within=120)  # the review run took the thread up
    hooks.enqueue([HookEvent("pull_request_review", _dismissal(submitted.payload))])
    await lc.settle()
    go.write_text("go")
    await working
    (thread,) = lc.ctx.db.call(
        lambda s: list(s.scalars(select(ReviewThread).where(ReviewThread.task_id == task_id)))
    )
    assert (thread.state, thread.reason) == (ThreadState.DECLINED, DISMISSED)
    assert thread.picked_job is not None  # the run had taken it up
    bodies = [c["body"] for c in await lc.comments(number)]
    assert not any("steelframe-thread-answer" in body for body in bodies)
    assert lc.task(issue).state == "delivered"
