"""A review thread's reply publishes the answer's text whole: it was made public (redacted,
defanged, bounded) by the caller, and a cut after that could drop a code span's closing
backtick and publish the link or image inside as markdown. Too long for GitHub, it is
withheld, never cut. A pure check of the body, and a review run whose agent claims a fix it
did not make (the worker's sentence before the agent's public text took it past 4000
characters). Real RQ workers, the GitHub sandbox, PostgreSQL."""

from __future__ import annotations

from bot.lifecycle.models import ThreadKind, ThreadState
from bot.lifecycle.public_text import shown
from bot.lifecycle.review_answers import CLAIMED_WITHOUT_CHANGE
from bot.lifecycle.thread_answers import MAX_ANSWER, TOO_LONG, ThreadAnswer, answer_body
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.test_lifecycle_review_runs import _comment, _replies

EVIL = "https://evil.example/p.png"
CODE = f" `![a]({EVIL})`"  # an image's source, shown as code: no image


def _question(text: str) -> ThreadAnswer:
    return ThreadAnswer(ThreadKind.COMMENT, 7, ThreadState.NEEDS_OPERATOR, text)


def test_a_code_span_past_4000_characters_stays_code() -> None:
    text = "x" * (4001 - len(CODE)) + CODE  # the closing backtick is character 4001
    body = answer_body(_question(text))
    assert body.endswith(text) and EVIL not in shown(body).links


def test_an_answer_longer_than_a_reply_is_withheld_not_cut() -> None:
    body = answer_body(_question("x" * (MAX_ANSWER - len(CODE) + 1) + CODE))
    assert body.endswith(f"\n\n{TOO_LONG}") and "x" not in body.split("\n", 3)[-1]


async def test_a_claimed_fix_past_4000_characters_keeps_its_code_span(make: Make) -> None:
    text = "x" * (4001 - len(CLAIMED_WITHOUT_CHANGE) - 2 - len(CODE)) + CODE
    lc = await make(coding_command=command("review_says", "addressed", text))
    _, number = await delivered_pull(lc)
    await _comment(lc, "maintainer", number, "write")
    await lc.work()
    (reply,) = await _replies(lc, number)
    assert f"{CLAIMED_WITHOUT_CHANGE}: {text}" in reply.body
    assert EVIL not in shown(reply.body).links
