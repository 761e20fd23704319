"""The operator Chat HTTP surface: endpoints, validation, isolation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.conftest import ApiClient, read_sse


async def test_blocking_chat_answers_and_persists_both_turns(api: ApiClient) -> None:
    response = await api.post("/api/operator/chat", json={"message": "What is the status?"})
    assert response.status == 200
    body = await response.json()
    assert "No model is configured" in body["reply"]
    assert body["intent"] == "answer"
    assert [m["role"] for m in body["history"]] == ["user", "assistant"]
    history = await (await api.get("/api/operator/chat")).json()
    assert next(m["content"] for m in history["messages"]) == "What is the status?"


async def test_stream_emits_status_thinking_delta_done_with_ids(api: ApiClient) -> None:
    response = await api.post("/api/operator/chat/stream", json={"message": "hello"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["X-Accel-Buffering"] == "no"
    frames = await read_sse(response)
    types = [f["type"] for f in frames]
    assert types[0] == "status" and "thinking" in types and "delta" in types
    assert types[-1] == "done"
    first = frames[0]["id"]
    assert [f["id"] for f in frames] == list(range(first, first + len(frames)))
    streamed = "".join(f["text"] for f in frames if f["type"] == "delta")
    assert "STEELFRAME_META" not in streamed
    assert frames[-1]["response"]["reply"] == streamed.strip()


async def test_frame_ids_keep_growing_across_the_turns_of_a_session(api: ApiClient) -> None:
    first = await read_sse(await api.post("/api/operator/chat/stream", json={"message": "one"}))
    second = await read_sse(await api.post("/api/operator/chat/stream", json={"message": "two"}))
    assert first[-1]["response"]["session"] == second[-1]["response"]["session"]
    assert second[0]["id"] > first[-1]["id"]  # a Last-Event-ID never names another turn's frame
    assert second[0]["id"] < 2**53  # exact as a JavaScript number


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": ""}, "message"),
        ({"message": "   \n"}, "message"),
        ({}, "message"),
        ({"message": 42}, "message"),
        ({"message": "hi", "focus": -3}, "focus"),
        ({"message": "hi", "focus": 1.5}, "focus"),
        ({"message": "hi", "focus": "7"}, "focus"),
        ({"message": "hi", "focus": True}, "focus"),
        ({"message": "hi", "session": 12}, "session"),
        ({"message": "hi", "agent": ["x"]}, "agent"),
        ({"message": "hi", "colour": "red"}, "colour"),
    ],
)
async def test_bad_chat_bodies_are_400_naming_the_field_and_write_nothing(
    api: ApiClient, body: dict[str, Any], field: str
) -> None:
    for path in ("/api/operator/chat", "/api/operator/chat/stream"):
        response = await api.post(path, json=body)
        assert response.status == 400
        error = await response.json()
        assert error["detail"]["field"] == field
    if field == "message" and body.get("message") != 42:
        assert error["error"] == "message is required"
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []


async def test_malformed_json_and_non_object_bodies_are_400(api: ApiClient) -> None:
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        response = await api.post("/api/operator/chat", data=raw)
        assert response.status == 400
        assert "error" in await response.json()


async def test_unknown_agent_is_400(api: ApiClient) -> None:
    response = await api.post("/api/operator/chat", json={"message": "hi", "agent": "nope"})
    assert response.status == 400
    assert (await response.json())["detail"]["field"] == "agent"


async def test_body_over_the_chat_cap_is_413(api: ApiClient) -> None:
    big = "x" * (api.services.settings.chat_max_body + 10)
    response = await api.post("/api/operator/chat", json={"message": big})
    assert response.status == 413
    assert (await response.json())["code"] == "payload_too_large"


async def test_missing_or_wrong_token_is_401_json(api: ApiClient) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        response = await api.raw.get("/api/operator/chat/sessions", headers=headers)
        assert response.status == 401
        assert (await response.json())["code"] == "unauthorized"


async def test_history_limit_validation(api: ApiClient) -> None:
    for bad in ("0", "-1", "abc", "1.5", "100000"):
        response = await api.get(f"/api/operator/chat?limit={bad}")
        assert response.status == 400
        assert (await response.json())["detail"]["field"] == "limit"
    await api.post("/api/operator/chat", json={"message": "one"})
    await api.post("/api/operator/chat", json={"message": "two"})
    history = await (await api.get("/api/operator/chat?limit=1")).json()
    assert len(history["messages"]) == 1
    assert history["messages"][0]["role"] == "assistant"


async def test_another_operators_session_is_404(api: ApiClient) -> None:
    body = await (await api.post("/api/operator/chat", json={"message": "mine"})).json()
    other = api.new_operator("other")
    session = body["session"]
    assert (await other.get(f"/api/operator/chat/session/{session}")).status == 404
    assert (await other.delete(f"/api/operator/chat/session/{session}")).status == 404
    assert (await other.get(f"/api/operator/chat?session={session}")).status == 404
    response = await other.post("/api/operator/chat", json={"message": "x", "session": session})
    assert response.status == 404
    assert (await (await other.get("/api/operator/chat/sessions")).json())["sessions"] == []
    still = await (await api.get(f"/api/operator/chat/session/{session}")).json()
    assert len(still["messages"]) == 2


async def test_sessions_new_title_reopen_and_pin(api: ApiClient) -> None:
    first = await (
        await api.post(
            "/api/operator/chat",
            json={
                "message": "First chat about the deploy pipeline and its many flaky retries in CI"
            },
        )
    ).json()
    created = await api.post("/api/operator/chat/new", json={})
    assert created.status == 201
    new = await created.json()
    assert new["previous_session"] == first["session"]
    await api.post("/api/operator/chat", json={"message": "second"})
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert [s["id"] for s in sessions] == [new["id"], first["session"]]
    title = sessions[1]["title"]
    assert len(title) <= 60 and title.endswith("…")
    assert title.startswith("First chat about the deploy pipeline")
    # reading does not move the next message; reopening (POST .../open) does
    await api.get(f"/api/operator/chat/session/{first['session']}")
    stays = await (await api.post("/api/operator/chat", json={"message": "still here"})).json()
    assert stays["session"] == new["id"]
    await api.post(f"/api/operator/chat/session/{first['session']}/open")
    again = await (await api.post("/api/operator/chat", json={"message": "continue"})).json()
    assert again["session"] == first["session"]


async def test_new_chat_summarises_previous_session_in_background(api: ApiClient) -> None:
    first = await (
        await api.post("/api/operator/chat", json={"message": "Why did the nightly build fail?"})
    ).json()
    await api.post("/api/operator/chat/new", json={})
    await api.services.background.drain()
    stored = await (await api.get(f"/api/operator/chat/session/{first['session']}")).json()
    assert stored["summary_status"] == "done"
    assert "Why did the nightly build fail?" in stored["summary"]


async def test_new_with_issue_is_a_discuss_session(api: ApiClient) -> None:
    response = await api.post("/api/operator/chat/new", json={"issue": 12})
    session = await response.json()
    assert (
        session["title"] == "Discuss #12"
        and session["focus"] == 12
        and session["kind"] == "discuss"
    )
    detail = await (await api.get(f"/api/operator/chat/session/{session['id']}")).json()
    assert detail["messages"] == []  # Discuss does not auto-send
    for bad in ({"issue": 0}, {"issue": "12"}, {"title": 5}, {"nope": 1}):
        assert (await api.post("/api/operator/chat/new", json=bad)).status == 400


async def test_clear_and_delete(api: ApiClient) -> None:
    body = await (await api.post("/api/operator/chat", json={"message": "hi"})).json()
    cleared = await (await api.post("/api/operator/chat/clear")).json()
    assert cleared == {"session": body["session"], "cleared": 2}
    assert (await (await api.get("/api/operator/chat")).json())["messages"] == []
    assert (await api.delete(f"/api/operator/chat/session/{body['session']}")).status == 200
    assert (await api.get(f"/api/operator/chat/session/{body['session']}")).status == 404
    assert (await api.get("/api/operator/chat/session/not-an-id!")).status == 400


async def test_healthz_and_openapi_match_routes(api: ApiClient) -> None:
    health = await (await api.raw.get("/healthz")).json()
    assert health["database"] is True and health["version"]
    document = await (await api.raw.get("/api/openapi.json")).json()
    routes = {
        (route.method.lower(), route.resource.canonical)
        for route in api.raw.app.router.routes()
        if route.method != "HEAD"
    }
    documented = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert routes == documented


async def test_unknown_route_is_json_404(api: ApiClient) -> None:
    response = await api.get("/api/operator/nothing-here")
    assert response.status == 404
    assert (await response.json())["code"] == "not_found"


async def test_a_body_that_arrives_in_pieces_is_read_whole(api: ApiClient) -> None:
    async def pieces() -> Any:
        body = json.dumps({"message": "x" * 3000}).encode()
        for start in range(0, len(body), 500):
            yield body[start : start + 500]
            await asyncio.sleep(0.01)

    response = await api.post("/api/operator/chat", data=pieces())
    assert response.status == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"message": "hi", "focus": 100000000000000000000000000000}', "focus"),
        ('{"message": "hi", "focus": 2147483648}', "focus"),
        ('{"message": "lone \\ud800 surrogate"}', "message"),
        ('{"message": "nul \\u0000 byte"}', "message"),
    ],
)
async def test_values_no_database_can_store_are_400(api: ApiClient, body: str, field: str) -> None:
    response = await api.post("/api/operator/chat", data=body.encode())
    assert response.status == 400
    assert (await response.json())["detail"]["field"] == field
    assert (await (await api.get("/api/operator/chat/sessions")).json())["sessions"] == []


async def test_paired_surrogate_escapes_are_fine(api: ApiClient) -> None:
    response = await api.post("/api/operator/chat", data=b'{"message": "ship it \\ud83d\\ude80"}')
    assert response.status == 200
    assert (await response.json())["history"][0]["content"] == "ship it 🚀"


async def test_a_reopened_session_is_summarised_again_when_closed(api: ApiClient) -> None:
    first = await (await api.post("/api/operator/chat", json={"message": "Why is CI red?"})).json()
    await api.post("/api/operator/chat/new", json={})
    await api.post(f"/api/operator/chat/session/{first['session']}/open")  # reopen
    await api.post("/api/operator/chat", json={"message": "And the flaky login test?"})
    await api.post("/api/operator/chat/new", json={})
    await api.services.background.drain()
    stored = await (await api.get(f"/api/operator/chat/session/{first['session']}")).json()
    assert stored["summary_status"] == "done"
    assert "2 message(s)" in stored["summary"]
