"""A person acting on a delivered task's pull request in the GitHub sandbox (merge, close,
review), several changes within one second, and GitHub sending a webhook again under a new
delivery id."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import aiohttp

from github_sandbox.operations import HookEvent
from tests.fakes.lifecycle import Lifecycle


async def as_person(
    lc: Lifecycle,
    login: str,
    method: str,
    path: str,
    payload: Any = None,
    *,
    permission: str | None = "write",
) -> Any:
    """One REST call on the sandbox repo as `login` (a collaborator with `permission`)."""
    token = lc.sandbox.user_token(login, permission)
    async with aiohttp.ClientSession() as http:
        response = await http.request(
            method,
            f"{lc.sandbox.url}/repos/{lc.repo}{path}",
            json=payload,
            headers={"Authorization": f"token {token}"},
        )
        assert response.status < 300, await response.text()
        answer = await response.json() if response.content_length != 0 else None
    await lc.settle()
    return answer


async def delivered_pull(lc: Lifecycle, title: str = "Make the widget blue") -> tuple[int, int]:
    """A task delivered by the committing runtime: (issue, pull request number)."""
    issue = await lc.open_issue(title)
    await lc.work()
    task = lc.task(issue)
    # This module's asserts are not rewritten by pytest: a failure says why by itself (a
    # CI run at load 20 said only "AssertionError" here).
    story = [(f"{e.at:%H:%M:%S}", e.kind, e.to_state, e.detail, e.data) for e in lc.events(task.id)]
    assert task.state == "delivered" and task.pr_number is not None, (
        f"task {task.id} is {task.state} (pull request {task.pr_number}), attempts "
        f"{task.attempts}, jobs still queued {lc.queued_jobs()}; its events: {story}"
    )
    return issue, task.pr_number


async def send_again(lc: Lifecycle, event: str, action: str, times: int = 1) -> int:
    """The last `event`.`action` webhook the sandbox sent, sent `times` more times, each
    under a new delivery id (what a receiver's duplicate check cannot catch); how many
    originals matched."""
    sent = [d for d in lc.sandbox.sandbox.hooks.sent if d.event == event and d.action == action]
    assert sent, f"no {event}.{action} webhook was sent"
    for _ in range(times):
        lc.sandbox.sandbox.hooks.enqueue([HookEvent(event, sent[-1].payload)])
    await lc.settle()
    return len(sent)


@contextlib.contextmanager
def one_second(lc: Lifecycle) -> Iterator[None]:
    """The sandbox's clock stands still on the next whole second while the block runs:
    every change in it has the same GitHub times (GitHub's are whole seconds)."""
    world = lc.sandbox.sandbox.world
    running, second = world.clock, float(int(world.clock()) + 1)
    world.clock = lambda: second
    try:
        yield
    finally:
        world.clock = running


async def reopen_delivered_before_its_close(lc: Lifecycle, event: str, path: str) -> None:
    """A maintainer closes then reopens `path` (`/issues/N` or `/pulls/N`) while the
    webhook fails; the reopen's retry is delivered and processed before the close's, as
    GitHub's retries may come."""
    hooks = lc.sandbox.sandbox.hooks
    url, secret = hooks.url, hooks.secret
    hooks.configure(None, secret)  # both deliveries fail for now
    for state in ("closed", "open"):
        await as_person(lc, "maintainer", "PATCH", path, {"state": state})
    closed, reopened = [d for d in hooks.sent if d.action in ("closed", "reopened")]
    hooks.configure(url, secret)
    for late in (reopened, closed):
        hooks.enqueue([HookEvent(event, late.payload)])
        await lc.settle()
