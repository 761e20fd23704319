"""A failing check's name is CI's text, chosen by whoever wrote the workflow: the progress
comment's line about it (`ci_intake`'s note), and the question the task asks when CI stops
(the Board, Chat, the CI history), are defanged as every public text is, so a name shaped as
markdown shows no image, link, mention or closing keyword for another issue."""

from __future__ import annotations

import re

from bot.lifecycle.public_text import shown
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.test_lifecycle_ci_fix import _rows, fail_head

HOSTILE = "fixes other/repo#1 ![px](https://evil.example/p.png) [docs](https://evil.example/x)"
MENTION = re.compile(r"@[A-Za-z0-9]")  # `@\u200bname` mentions nobody
# A closing keyword right before the other issue's reference: what GitHub acts on.
_CLOSES_OTHER = re.compile(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*other/repo#1")


async def test_a_check_name_shaped_as_markdown_shows_no_link_image_or_closing_keyword(
    make: Make,
) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number, name=HOSTILE)
    bodies = [c["body"] for c in await lc.comments(issue) if "CI failed" in c["body"]]
    assert bodies, [c["body"] for c in await lc.comments(issue)]
    for body in bodies:
        view = shown(body)
        assert not [link for link in view.links if "evil.example" in link], body
        assert "https://evil.example" not in view.prose, body  # no bare URL GitHub links
        assert not _CLOSES_OTHER.search(view.text), body
        assert "other/repo#1" in view.text  # the name is still readable


def _safe(text: str) -> None:
    view = shown(text)
    assert not [link for link in view.links if "evil.example" in link], text
    assert "https://evil.example" not in view.prose, text
    assert not _CLOSES_OTHER.search(view.text) and not MENTION.search(view.text), text
    assert "other/repo#1" in view.text and "admin" in view.text  # still readable


async def test_the_question_a_ci_stop_asks_shows_no_link_image_mention_or_closing_keyword(
    make: Make,
) -> None:
    lc = await make(coding_command=command("echo"), ci_fix_runs=0)  # a person at once
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number, name=f"@admin {HOSTILE}")
    task = lc.task(issue)
    assert task.state == TaskState.WAITING_FOR_INFO and task.question is not None
    _safe(task.question)
    board = (await (await lc.api.get("/api/operator/board")).json())["tasks"]
    (card,) = [t for t in board if t["id"] == task.id]
    assert card["question"] == task.question
    (row,) = _rows(lc, task.id)
    _safe(row.reason)  # the CI history's reason
