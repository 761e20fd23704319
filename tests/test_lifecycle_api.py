"""The operator API of the lifecycle (board, task, terminate, archive) and task results
delivered to the chat session that filed the task, exactly once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.lifecycle.delivery import deliver_pending, message_id
from bot.lifecycle.models import ChatDelivery, EventKind
from bot.lifecycle.states import TaskState
from tests.conftest import ApiClient
from tests.fakes.coding import command
from tests.fakes.lifecycle import DECISION, Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture


async def board(api: ApiClient, query: str = "") -> list[dict[str, Any]]:
    response = await api.get(f"/api/operator/board{query}")
    assert response.status == 200
    return list((await response.json())["tasks"])


async def delivered_task(lc: Lifecycle, title: str = "Make the widget blue") -> int:
    issue = await lc.open_issue(title)
    await lc.work()
    return lc.task(issue).id


async def test_the_board_shows_tasks_with_their_state_pr_and_last_event(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    done = await delivered_task(lc)
    waiting_issue = await lc.open_issue("Queued one")
    tasks = await board(lc.api)
    assert [t["id"] for t in tasks] == [lc.task(waiting_issue).id, done]
    first = tasks[1]
    assert set(first) == {
        "id",
        "repo",
        "issue",
        "title",
        "state",
        "archived",
        "pr_url",
        "cost_usd",
        "tokens",
        "last_event",
        "updated_at",
        "pr_state",
        "review",
        "ready_for_review",
        "question",
        "review_pickup",
        "fix_run",
    }
    assert first["question"] is None  # not waiting: the Board sends no question
    assert first["state"] == "delivered" and first["title"] == "Make the widget blue"
    assert (first["pr_state"], first["ready_for_review"]) == ("open", True)
    assert first["pr_url"] == lc.task(first["issue"]).pr_url
    assert first["cost_usd"] == pytest.approx(0.001)  # what the runtime reported
    assert first["tokens"] == 150
    assert tasks[0]["cost_usd"] == 0
    assert first["last_event"]["kind"] == "transition"
    assert first["last_event"]["detail"].startswith("pull request ")
    assert [t["id"] for t in await board(lc.api, "?state=queued")] == [tasks[0]["id"]]
    assert await board(lc.api, "?state=failed") == []


async def test_a_task_has_its_event_log(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    task_id = await delivered_task(lc)
    response = await lc.api.get(f"/api/operator/tasks/{task_id}")
    assert response.status == 200
    body = await response.json()
    assert body["state"] == "delivered" and body["attempts"] == 1
    kinds = [(e["kind"], e["to"]) for e in body["events"]]
    assert kinds[0] == ("created", "queued")
    assert ("transition", "running") in kinds and kinds[-1] == ("transition", "delivered")
    assert body["events"][0]["actor"] == "webhook:issues.labeled"
    assert body["usage"]["tokens"] == 150 and body["lease"] is None


async def test_archive_hides_a_finished_task_until_asked_for(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    task_id = await delivered_task(lc)
    response = await lc.api.post(f"/api/operator/tasks/{task_id}/archive")
    assert response.status == 200 and (await response.json())["archived"] is True
    again = await lc.api.post(f"/api/operator/tasks/{task_id}/archive")
    assert again.status == 200
    events = (await again.json())["events"]
    assert [e["kind"] for e in events].count("archived") == 1
    assert await board(lc.api) == []
    shown = await board(lc.api, "?archived=true")
    assert [t["id"] for t in shown] == [task_id] and shown[0]["archived"] is True


async def test_a_live_task_cannot_be_archived(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    response = await lc.api.post(f"/api/operator/tasks/{lc.task(issue).id}/archive")
    assert response.status == 409
    error = await response.json()
    assert error["code"] == "conflict" and error["detail"]["state"] == "queued"
    assert lc.task(issue).archived is False


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/operator/board?state=done", "state"),
        ("/api/operator/board?archived=yes", "archived"),
        ("/api/operator/board?limit=0", "limit"),
        ("/api/operator/board?limit=x", "limit"),
        ("/api/operator/tasks/abc", "id"),
        ("/api/operator/tasks/-1", "id"),
        ("/api/operator/tasks/0", "id"),
        ("/api/operator/tasks/%C2%B2", "id"),  # "²": str.isdigit() says yes, int() says no
        ("/api/operator/tasks/%EF%BC%91", "id"),  # a full-width "1"
        ("/api/operator/tasks/" + "9" * 5000, "id"),  # beyond int()'s digit limit
        ("/api/operator/tasks/0012", "id"),
    ],
)
async def test_bad_board_and_task_queries_are_400_naming_the_field(
    make: Make, path: str, field: str
) -> None:
    lc = await make()
    response = await lc.api.get(path)
    assert response.status == 400
    error = await response.json()
    assert set(error) == {"error", "code", "detail"} and error["detail"]["field"] == field


async def test_bad_action_requests_are_refused_and_change_nothing(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    task_id = lc.task(issue).id
    for action in ("terminate", "archive"):
        unknown = await lc.api.get(f"/api/operator/tasks/{task_id + 100}")
        assert unknown.status == 404 and (await unknown.json())["code"] == "not_found"
        missing = await lc.api.post(f"/api/operator/tasks/{task_id + 100}/{action}")
        assert missing.status == 404
        extra = await lc.api.post(f"/api/operator/tasks/{task_id}/{action}", json={"force": 1})
        assert extra.status == 400 and (await extra.json())["detail"]["field"] == "force"
        garbage = await lc.api.post(f"/api/operator/tasks/{task_id}/{action}", data=b"{no")
        assert garbage.status == 400
        unauthorized = await lc.api.raw.post(f"/api/operator/tasks/{task_id}/{action}")
        assert unauthorized.status == 401
    assert lc.task(issue).state == TaskState.QUEUED
    assert (await lc.api.get("/api/operator/board")).status == 200
    assert (await lc.api.raw.get("/api/operator/board")).status == 401


async def test_without_redis_the_board_reads_and_actions_are_503(api: ApiClient) -> None:
    assert api.services.lifecycle is None
    assert await board(api) == []
    response = await api.post("/api/operator/tasks/1/terminate")
    assert response.status == 503
    assert "STEELFRAME_REDIS_URL" in (await response.json())["error"]


async def _chat_session(api: ApiClient) -> str:
    response = await api.post("/api/operator/chat/new", json={"title": "filing"})
    assert response.status == 201
    return str((await response.json())["id"])


async def _assistant_messages(api: ApiClient, session: str) -> list[dict[str, Any]]:
    body = await (await api.get(f"/api/operator/chat/session/{session}")).json()
    return [m for m in body["messages"] if m["role"] == "assistant"]


async def test_results_of_a_task_filed_from_chat_reach_that_session_exactly_once(
    make: Make,
) -> None:
    lc = await make(coding_command=command("question"))
    session = await _chat_session(lc.api)
    issue = await lc.open_issue("Add a cache", pickup=False)
    result = await lc.pickups.pickup(
        lc.repo, issue, title="Add a cache", origin_session=session, cause=f"chat:{session}"
    )
    assert (result.created, result.started) == (True, True)
    await lc.work()
    messages = await _assistant_messages(lc.api, session)
    assert len(messages) == 1
    asked = messages[0]
    assert "needs information" in asked["content"]
    assert "Should the cache use Redis or SQLite?" in asked["content"]
    assert asked["meta"]["kind"] == "task_result" and asked["meta"]["state"] == "waiting_for_info"
    event = next(e for e in lc.events(result.task_id) if e.to_state == "waiting_for_info")
    assert asked["id"] == message_id(result.task_id, event.id)

    await lc.github.create_comment(lc.repo, issue, f"{DECISION}\nRedis.")
    await lc.settle()
    await lc.work()
    messages = await _assistant_messages(lc.api, session)
    assert [m["meta"]["state"] for m in messages] == ["waiting_for_info", "delivered"]
    assert lc.task(issue).pr_url in messages[1]["content"]
    # Delivering again (a retried job, the reconciler, two at once) adds nothing.
    again = await asyncio.gather(
        *(asyncio.to_thread(deliver_pending, lc.ctx.db, result.task_id) for _ in range(4))
    )
    assert again == [[], [], [], []]
    assert len(await _assistant_messages(lc.api, session)) == 2
    seqs = [
        m["seq"]
        for m in (await (await lc.api.get(f"/api/operator/chat/session/{session}")).json())[
            "messages"
        ]
    ]
    assert seqs == sorted(set(seqs))


async def test_a_webhook_pickup_first_then_the_chat_filing_still_links_the_session(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    session = await _chat_session(lc.api)
    issue = await lc.open_issue()  # the webhook won the race
    result = await lc.pickups.pickup(
        lc.repo, issue, title="x", origin_session=session, cause=f"chat:{session}"
    )
    assert (result.created, result.started) == (False, False)
    assert any(e.kind == EventKind.ORIGIN_LINKED for e in lc.events(result.task_id))
    await lc.work()
    messages = await _assistant_messages(lc.api, session)
    assert len(messages) == 1 and messages[0]["meta"]["state"] == "delivered"


async def test_a_result_for_a_deleted_chat_session_is_marked_and_not_written(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    session = await _chat_session(lc.api)
    issue = await lc.open_issue(pickup=False)
    result = await lc.pickups.pickup(lc.repo, issue, title="x", origin_session=session, cause="c")
    assert (await lc.api.delete(f"/api/operator/chat/session/{session}")).status == 200
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    markers = lc.ctx.db.call(
        lambda s: [(d.outcome, d.task_id) for d in s.query(ChatDelivery).all()]
    )
    assert markers == [("skipped", result.task_id)]
