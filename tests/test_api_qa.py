"""Defects found by exploratory QA of the operator Chat API against the contract
(../shared/spec/steelframe-chat.md, docs/api.md), each pinned by the case that showed it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.chat.turn_request import TurnRequest
from bot.errors import Conflict, NotFound
from bot.operators import authenticate
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox, make_settings, read_sse
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply


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


def _operator_id(api: ApiClient) -> int:
    return api.services.db.call(authenticate, api.token).id


async def test_a_send_refused_while_another_is_being_set_up_names_its_session(
    api: ApiClient,
) -> None:
    # Two sends at once (a double click, two tabs): the second is refused while the first
    # is still placing its session (a database read). The 409 named no session
    # (`detail.session: null`), and the web GUI re-attaches only with one (chat.js,
    # sendFailed): it told the operator "Not sent" about a turn that was running.
    operator = _operator_id(api)
    turns = api.services.chat_turns
    first, second = await asyncio.gather(
        turns.start_turn(TurnRequest(operator_id=operator, message="one")),
        turns.start_turn(TurnRequest(operator_id=operator, message="two")),
        return_exceptions=True,
    )
    assert isinstance(second, Conflict), second
    assert not isinstance(first, BaseException)
    assert second.detail is not None
    assert second.detail.session == first.session_id != ""
    assert second.detail.turn_id == first.turn_id
    assert first.task is not None
    await asyncio.wait_for(asyncio.shield(first.task), timeout=PATIENCE_SECONDS)


async def test_a_send_refused_at_set_up_does_not_refuse_one_sent_with_it(
    api: ApiClient,
) -> None:
    # A send naming a session that does not exist is a 404 and changes nothing; a good
    # send arriving while it was being refused got a 409 for a turn that never ran.
    operator = _operator_id(api)
    turns = api.services.chat_turns
    bad, good = await asyncio.gather(
        turns.start_turn(TurnRequest(operator_id=operator, message="one", session_id="gone")),
        turns.start_turn(TurnRequest(operator_id=operator, message="two")),
        return_exceptions=True,
    )
    assert isinstance(bad, NotFound), bad
    assert not isinstance(good, BaseException), good
    assert good.task is not None
    await asyncio.wait_for(asyncio.shield(good.task), timeout=PATIENCE_SECONDS)
    history = await (await api.get("/api/operator/chat")).json()
    assert [m["content"] for m in history["messages"]][:1] == ["two"]


def _string_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The string branch of a property (`anyOf` string/null for an optional one)."""
    if "anyOf" in schema:
        return next(s for s in schema["anyOf"] if s.get("type") == "string")
    return schema


async def test_the_chat_request_schema_states_the_limits_the_service_enforces(
    api: ApiClient,
) -> None:
    # The published ChatRequest said nothing of the lengths the service refuses (a message
    # over 32,000 characters, a session id over 64, an agent name over 100): a client
    # built from the document sent what it allowed and got a 400.
    doc = await (await api.raw.get("/api/openapi.json")).json()
    fields = doc["components"]["schemas"]["ChatRequest"]["properties"]
    limits = {
        name: _string_schema(fields[name]).get("maxLength")
        for name in ("message", "session", "agent")
    }
    assert limits["message"] and limits["session"] and limits["agent"], limits

    at_limit = await api.post("/api/operator/chat", json={"message": "x" * limits["message"]})
    assert at_limit.status == 200
    for name, value, at_limit_status in (
        ("session", "a" * limits["session"], 404),  # well-formed, not found
        ("agent", "a" * limits["agent"], 400),  # well-formed, not configured
    ):
        ok = await api.post("/api/operator/chat", json={"message": "hi", name: value})
        assert ok.status == at_limit_status
        assert "longer than" not in (await ok.json())["error"]
    for name, value in (
        ("message", "x" * (limits["message"] + 1)),
        ("session", "a" * (limits["session"] + 1)),
        ("agent", "a" * (limits["agent"] + 1)),
    ):
        body = {"message": "hi", name: value}
        over = await api.post("/api/operator/chat", json=body)
        assert over.status == 400
        assert (await over.json())["detail"]["field"] == name


async def test_filing_the_same_title_again_with_other_spacing_files_one_issue(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    # POST /chat/file with a title files it under a key of that title, so a repeat answers
    # 200 with the same issue; but the key was the title as sent while the issue gets it
    # normalised (one line, single spaces, no leading punctuation): a retry whose client
    # trimmed differently filed a second issue with the very same title on GitHub.
    service = await api_factory(github_sandbox.settings(tmp_path, redis_url=redis_url))
    first = await service.post("/api/operator/chat/file", json={"title": "Flaky login test"})
    assert first.status == 201
    number = (await first.json())["filed_issue_number"]
    for again in ("Flaky login test ", "  Flaky   login\ntest", "- Flaky login test"):
        repeat = await service.post("/api/operator/chat/file", json={"title": again})
        assert (repeat.status, (await repeat.json())["filed_issue_number"]) == (200, number)
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    titles = [issue.title for issue in repo.issues.values() if not issue.is_pull]
    assert titles == ["Flaky login test"]


async def test_a_stop_with_a_body_it_does_not_take_is_400_and_stops_nothing(
    api_factory: Any, tmp_path: Path
) -> None:
    # POST /chat/stop takes no body. It was never read, so {"session": X} (a client that
    # meant "stop the turn in X") stopped the operator's turn wherever it ran, and garbage
    # was a 200; POST .../open and .../seen, which take no body either, refuse both.
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("answered after all")], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    stream = await api.post("/api/operator/chat/stream", json={"message": "hold on"})
    await asyncio.wait_for(runtime.called.wait(), timeout=PATIENCE_SECONDS)
    for body in ({"session": "abc123"}, b"not json", [1]):
        sent = {"json": body} if not isinstance(body, bytes) else {"data": body}
        refused = await api.post("/api/operator/chat/stop", **sent)
        assert refused.status == 400, await refused.text()
        assert (await refused.json())["code"] == "bad_request"
    gate.set()
    frames = await read_sse(stream)
    assert frames[-1]["type"] == "done"
    assert frames[-1]["response"]["reply"] == "answered after all"
    for body in ({}, None):  # none, or an empty object, is a stop
        sent = {} if body is None else {"json": body}
        assert (await api.post("/api/operator/chat/stop", **sent)).status == 200


async def test_a_finished_turn_is_re_attachable_by_its_session_after_another_turn_starts(
    api: ApiClient,
) -> None:
    # docs/api.md: re-attach with ?session=ID and Last-Event-ID; a finished turn stays
    # re-attachable for two minutes. Without Redis only the operator's latest turn was
    # found by session: once a turn ran in another session, ?session= of the first was a
    # 404 although ?turn= still found it (the relay covers this only with Redis).
    first = await read_sse(await api.post("/api/operator/chat/stream", json={"message": "one"}))
    session = first[-1]["response"]["session"]
    assert (await api.post("/api/operator/chat/new")).status == 201
    other = await read_sse(await api.post("/api/operator/chat/stream", json={"message": "two"}))
    assert other[-1]["response"]["session"] != session

    last_seen = {"Last-Event-ID": str(first[-2]["id"])}
    again = await api.get(f"/api/operator/chat/stream?session={session}", headers=last_seen)
    assert again.status == 200, await again.text()
    assert await read_sse(again) == first[-1:]
    latest = await api.get(f"/api/operator/chat/stream?session={other[0]['session']}")
    assert [f["id"] for f in await read_sse(latest)] == [f["id"] for f in other]


async def test_a_decision_body_of_the_wrong_type_is_named_as_such(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    # {"body": 5} answered "body is required", as if no body had been sent (the chat
    # endpoint says "message must be a string" for the same mistake).
    service = await api_factory(github_sandbox.settings(tmp_path, redis_url=redis_url))
    for body, said in ((5, "body must be a string"), ("  ", "body is required")):
        answer = await service.post("/api/operator/chat/decision", json={"issue": 1, "body": body})
        assert answer.status == 400
        assert await answer.json() == {
            "error": said,
            "code": "bad_request",
            "detail": {"field": "body"},
        }


async def test_numbers_are_plain_ascii_digits(api: ApiClient) -> None:
    """int() also reads "1_000", "+7" and other scripts' digits ("٣" is 3): a client that
    sends those gets a 400 naming the field, not a guess."""
    for sent in ("1_000", "+7", "٣", "-1"):
        events = await api.get("/api/operator/events", headers={"Last-Event-ID": sent})
        assert events.status == 400, sent
        assert (await events.json())["detail"]["field"] == "Last-Event-ID"
    good = await api.get("/api/operator/events", headers={"Last-Event-ID": "0"})
    assert good.status == 200
    good.close()


async def test_a_bad_turn_id_is_named_a_turn_id(api: ApiClient) -> None:
    answer = await api.get("/api/operator/chat/stream?turn=not-a-turn!")
    assert answer.status == 400
    assert (await answer.json())["error"] == "turn is not a valid turn id"
