"""Defects found by exploratory QA of the operator Chat API against the contract
(../shared/spec/steelframe-chat.md, docs/api.md), each pinned by the case that showed it."""

from __future__ import annotations

from tests.conftest import ApiClient, read_sse


async def test_every_sse_answer_carries_the_request_id(api: ApiClient) -> None:
    # docs/api.md: "Every response carries X-Request-Id (echoed from the request when
    # given)". The streams were prepared before the error middleware could add it, so the
    # one id a client can quote for a cut stream (the service logs it) was missing.
    sent = {"X-Request-Id": "qa-stream-1"}
    stream = await api.post("/api/operator/chat/stream", json={"message": "hi"}, headers=sent)
    assert stream.headers.get("X-Request-Id") == "qa-stream-1"
    frames = await read_sse(stream)
    session = frames[-1]["response"]["session"]

    sent = {"X-Request-Id": "qa-stream-2", "Last-Event-ID": str(frames[0]["id"])}
    again = await api.get(f"/api/operator/chat/stream?session={session}", headers=sent)
    assert again.status == 200
    assert again.headers.get("X-Request-Id") == "qa-stream-2"
    await read_sse(again)

    events = await api.get("/api/operator/events", headers={"X-Request-Id": "qa-events"})
    assert events.status == 200
    assert events.headers.get("X-Request-Id") == "qa-events"
    events.close()

    unnamed = await api.post("/api/operator/chat/stream", json={"message": "again"})
    assert unnamed.headers.get("X-Request-Id")  # one of the service's own when none is sent
    await read_sse(unnamed)
