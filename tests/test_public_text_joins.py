"""Public text is closed: a part defanged on its own leaves no fence open, so a body that
joins parts (a pull request's summary and its approved plan, a review run's questions)
shows nothing live that neither part showed alone: an unclosed fence at the end of one part
no longer turns the next part's fenced image into a live one."""

from __future__ import annotations

import pytest

from bot.lifecycle.plan_flow import PLAN_LABEL
from bot.lifecycle.public_text import PublicPlace, defang, shown
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, PICKUP, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import as_person, delivered_pull

PLACE = PublicPlace(repo="owner/repo", issue=5, host="github.com")
EVIL = "https://evil.example/p.png"
FENCED_IMAGE = f"Approach: make it blue, as in\n```\n![logo]({EVIL})\n```"


def _live(markdown: str) -> list[str]:
    return [link for link in shown(markdown).links if "evil.example" in link]


@pytest.mark.parametrize(
    "opened",
    [
        "Made the widget blue. Output:\n```",
        "Output:\n~~~~\nlog ```\n",
        "Output:\n   ```python\nprint(1)",
        "Output:\n````\n```\n",  # a shorter fence inside closes nothing
    ],
)
def test_a_fence_left_open_is_closed_so_the_next_part_stays_fenced(opened: str) -> None:
    first, second = defang(opened, PLACE), defang(FENCED_IMAGE, PLACE)
    assert not _live(first) and not _live(second)
    assert not _live(f"{first}\n\n### Approved plan\n\n{second}")
    assert not _live(f"{first}\n\n{first}\n\n{second}")


def test_a_reference_definition_elsewhere_is_undone_even_unused() -> None:
    # Unused, it shows nothing; a part joined before it could link with it. (The `~~~`
    # inside the fence once read as its end, the definition after it as fenced.)
    defined = defang("Notes\n```\n~~~\n```\n[logo]: https://evil.example/p.png", PLACE)
    assert not _live(f"{defang('See [the logo][logo].', PLACE)}\n\n{defined}")


async def test_an_open_fence_in_the_summary_leaves_the_approved_plans_image_fenced(
    make: Make,
) -> None:
    lc = await make(coding_command=command("fenced_plan"))
    issue = await lc.github.create_issue(
        lc.repo, title="Make the widget blue", body="It is red.", labels=[PICKUP, PLAN_LABEL]
    )
    await lc.settle()
    await lc.work()
    assert lc.task(issue.number).state == TaskState.WAITING_FOR_INFO
    await lc.comment_as("maintainer", issue.number, f"{DECISION}\nGo ahead.", "write")
    await lc.work()
    assert lc.task(issue.number).state == TaskState.DELIVERED
    (pull,) = await lc.pulls()
    assert "### Approved plan" in pull["body"] and "evil.example" in pull["body"]  # as text
    assert not _live(pull["body"]), pull["body"]
    for comment in await lc.comments(issue.number):
        assert not _live(comment["body"]), comment["body"]


async def _comment(lc: Lifecycle, number: int, line: int) -> None:
    pull = await lc.github.get_pull(lc.repo, number)
    body = {"body": "Why?", "commit_id": pull.head.sha, "path": "CHANGE.md", "line": line}
    await as_person(lc, "maintainer", "POST", f"/pulls/{number}/comments", body)


async def test_an_open_fence_in_one_review_question_leaves_the_next_ones_image_fenced(
    make: Make,
) -> None:
    # Each thread gets the same question: a fenced image, then a fence left open.
    question = f"Look:\n```\n![logo]({EVIL})\n```\nOutput:\n```"
    lc = await make(coding_command=command("review_says", "question", question))
    issue, number = await delivered_pull(lc)
    await _comment(lc, number, 1)
    await _comment(lc, number, 1)
    await lc.work()
    assert lc.task(issue).state == TaskState.WAITING_FOR_INFO
    notices = [c["body"] for c in await lc.comments(issue) if "Look:" in c["body"]]
    assert notices, [c["body"] for c in await lc.comments(issue)]
    for body in notices:
        assert body.count("Look:") == 2, body  # both questions, in one notice
        assert not _live(body), body
