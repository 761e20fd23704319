"""A Board card carries its task's latest review pickup and fix run as the events stream's
`review` and `fix_run` events told them (bot/lifecycle/board.py), so a client polling the
Board words the same notifications without reading the task; a card without either sends
nulls, last in the JSON."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from bot.lifecycle.board import board_task
from bot.lifecycle.models import EventKind, Task, TaskEvent
from bot.lifecycle.pull_view import LedgerCounts, PullState, PullView

AT = datetime(2026, 12, 5, 14, 0, tzinfo=UTC)
VIEW = PullView(PullState.OPEN, LedgerCounts(open=1), False)


def _task() -> Task:
    return Task(
        id=7,
        repo="octo/widgets",
        issue=3,
        title="Make the widget blue",
        state="running",
        archived=False,
        pr_url="https://github.com/octo/widgets/pull/9",
        cost_usd=0.0,
        tokens_used=0,
        updated_at=AT,
    )


def _event(event_id: int, kind: EventKind, **data: object) -> TaskEvent:
    return TaskEvent(id=event_id, task_id=7, kind=kind.value, at=AT, detail="", data=data)


def test_a_card_carries_its_latest_review_pickup_and_fix_run() -> None:
    news = [
        _event(4, EventKind.REVIEW_PICKUP, threads=["comment:2001", "review:3001"], job="j"),
        _event(5, EventKind.CI_FIX_RUN, pr_number=9, head_sha="a" * 40, checks=["tests"],
               fix_run=1, fix_runs=2),
        _event(8, EventKind.CI_FIX_RUN, pr_number=9, head_sha="b" * 40, checks=["lint"],
               fix_run=2, fix_runs=2),
    ]  # fmt: skip
    card = msgspec.to_builtins(board_task(_task(), news[-1], VIEW, news))
    assert list(card)[-2:] == ["review_pickup", "fix_run"]
    assert card["review_pickup"] == {
        "event_id": 4,
        "at": "2026-12-05T14:00:00+00:00",
        "threads": ["comment:2001", "review:3001"],
    }
    assert card["fix_run"] == {
        "event_id": 8,
        "at": "2026-12-05T14:00:00+00:00",
        "pr_number": 9,
        "head_sha": "b" * 40,
        "checks": ["lint"],
        "run": 2,
        "of": 2,
        # An event written before conclusions were recorded: its names, conclusion unknown.
        "failing": ({"name": "lint", "conclusion": ""},),
    }


def test_a_card_without_news_sends_nulls() -> None:
    card = msgspec.to_builtins(board_task(_task(), None, VIEW))
    assert (card["review_pickup"], card["fix_run"]) == (None, None)
