"""Archive's Undo (`POST /api/operator/tasks/{id}/unarchive`) and the server-kept unseen dot
(`POST /api/operator/chat/session/{id}/seen`): idempotent, and bad input is a 4xx that
changes nothing."""

from __future__ import annotations

from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.test_lifecycle_api import board


async def test_unarchive_brings_the_task_back_once_and_refuses_bad_input(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    task_id = lc.task(issue).id
    never = await lc.api.post(f"/api/operator/tasks/{task_id}/unarchive")  # not archived
    assert never.status == 200 and (await never.json())["archived"] is False
    assert (await lc.api.post(f"/api/operator/tasks/{task_id}/archive")).status == 200
    assert await board(lc.api) == []
    for _ in range(2):  # a double click, a retry: one event
        response = await lc.api.post(f"/api/operator/tasks/{task_id}/unarchive")
        assert response.status == 200
        detail = await response.json()
        assert detail["archived"] is False and detail["state"] == "delivered"
    assert [e["kind"] for e in detail["events"]].count("unarchived") == 1
    assert [t["id"] for t in await board(lc.api)] == [task_id]

    assert (await lc.api.post(f"/api/operator/tasks/{task_id}/archive")).status == 200
    for path, body, status in (
        (f"/api/operator/tasks/{task_id + 100}/unarchive", None, 404),
        ("/api/operator/tasks/0/unarchive", None, 400),
        ("/api/operator/tasks/x²/unarchive", None, 400),
        (f"/api/operator/tasks/{task_id}/unarchive", {"force": True}, 400),
    ):
        refused = await lc.api.post(path, json=body)
        assert refused.status == status, path
        assert set(await refused.json()) == {"error", "code", "detail"}
    unauthorized = await lc.api.raw.post(f"/api/operator/tasks/{task_id}/unarchive")
    assert unauthorized.status == 401
    assert lc.task(issue).archived is True  # nothing changed


async def test_seen_is_idempotent_and_only_for_the_operators_own_session(make: Make) -> None:
    lc = await make(coding_command=command("commit"))
    done = await (await lc.api.post("/api/operator/chat", json={"message": "hello"})).json()
    sid = done["session"]
    for _ in range(2):
        seen = await lc.api.post(f"/api/operator/chat/session/{sid}/seen")
        assert seen.status == 200 and await seen.json() == {"session": sid, "unseen": False}
    unknown = await lc.api.post("/api/operator/chat/session/0123456789abcdef/seen")
    assert unknown.status == 404
    extra = await lc.api.post(f"/api/operator/chat/session/{sid}/seen", json={"all": True})
    assert extra.status == 400
    listed = (await (await lc.api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert [(s["id"], s["unseen"], s["label"]) for s in listed] == [(sid, False, "hello")]
