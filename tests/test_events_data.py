"""A task event's typed data (bot.contracts.tasks.EventData) as the task JSON sends it: what
the run and the lifecycle wrote, key for key, readable with the task JSON's own Structs."""

from __future__ import annotations

from typing import Any

import msgspec

from bot.contracts.tasks import TaskDetail
from tests.fakes.coding import command
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull


async def _detail(lc: Lifecycle, task_id: int) -> tuple[dict[str, Any], TaskDetail]:
    """The task JSON as a client reads it, and decoded strictly into its Struct."""
    response = await lc.api.get(f"/api/operator/tasks/{task_id}")
    assert response.status == 200
    raw = await response.read()
    return msgspec.json.decode(raw), msgspec.json.decode(raw, type=TaskDetail)


async def test_the_delivery_event_carries_the_pull_request_the_run_opened(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue, number = await delivered_pull(lc)
    detail, typed = await _detail(lc, lc.task(issue).id)
    delivered = [e for e in detail["events"] if e["to"] == "delivered"][-1]
    # The keys in the order finish.py writes them, as before they were typed.
    assert list(delivered["data"]) == ["pr_url", "pr_number", "summary", "draft"]
    assert delivered["data"]["pr_url"] == detail["pr_url"]
    assert (delivered["data"]["pr_number"], delivered["data"]["draft"]) == (number, False)
    same = next(e for e in typed.events if e.id == delivered["id"])
    assert same.data == delivered["data"]


async def test_a_question_and_the_runtime_session_are_in_their_events_data(make: Make) -> None:
    lc = await make(coding_command=command("question"))
    issue = await lc.open_issue("Add a cache")
    await lc.work()
    task = lc.task(issue)
    assert task.state == "waiting_for_info"
    detail, typed = await _detail(lc, task.id)
    asked = [e for e in detail["events"] if e["to"] == "waiting_for_info"][-1]
    assert asked["data"] == {"question": "Should the cache use Redis or SQLite?"}
    session = [e for e in typed.events if e.kind == "runtime_session"][-1]
    assert session.data is not None and session.data.get("session_id") == "sess-question-1"
    assert set(session.data) == {"session_id", "transcript"}
    # A created event has no data: an empty object, not a null.
    created = next(e for e in detail["events"] if e["kind"] == "created")
    assert created["data"] == {}
