"""The task JSON's bytes, pinned: the Structs that extend `TaskCore` (bot/contracts/tasks.py)
are built from its values once (bot/lifecycle/board.py), and a client reads the same keys,
in the same order, with the same values as before."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from bot.lifecycle.board import board_task
from bot.lifecycle.models import Task, TaskEvent
from bot.lifecycle.pull_view import LedgerCounts, PullState, PullView

AT = datetime(2026, 12, 5, 14, 0, tzinfo=UTC)


def _task(pr_url: str | None) -> Task:
    return Task(
        id=7,
        repo="octo/widgets",
        issue=3,
        title="Make the widget blue",
        state="delivered",
        archived=False,
        pr_url=pr_url,
        cost_usd=0.5,
        tokens_used=1200,
        updated_at=AT,
    )


def test_a_board_card_is_the_task_core_then_its_pull_request_loop() -> None:
    last = TaskEvent(kind="transition", at=AT, detail="running -> delivered")
    view = PullView(PullState.DRAFT, LedgerCounts(open=1, addressed=2), True)
    card = board_task(_task("https://github.com/octo/widgets/pull/9"), last, view)
    assert msgspec.json.encode(card) == (
        b'{"id":7,"repo":"octo/widgets","issue":3,"title":"Make the widget blue",'
        b'"state":"delivered","archived":false,"pr_url":"https://github.com/octo/widgets/pull/9",'
        b'"cost_usd":0.5,"tokens":1200,"last_event":{"kind":"transition",'
        b'"at":"2026-12-05T14:00:00+00:00","detail":"running -> delivered"},'
        b'"updated_at":"2026-12-05T14:00:00+00:00","pr_state":"draft","review":{"open":1,'
        b'"addressed":2,"declined":0,"needs_operator":0,"summary":'
        + msgspec.json.encode(card.review.summary)
        + b'},"ready_for_review":true,"question":null,"review_pickup":null,"fix_run":null}'
    )


def test_a_card_without_a_pull_request_or_events_sends_its_nulls() -> None:
    card = board_task(_task(None), None, PullView(None, LedgerCounts(), False))
    encoded = msgspec.json.decode(msgspec.json.encode(card))
    assert list(encoded)[:11] == [
        "id", "repo", "issue", "title", "state", "archived", "pr_url", "cost_usd", "tokens",
        "last_event", "updated_at",
    ]  # fmt: skip
    assert (encoded["pr_url"], encoded["last_event"], encoded["pr_state"]) == (None, None, None)
