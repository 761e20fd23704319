"""A chat message sent with an idempotency key (`Idempotency-Key`, or `request_id` in the
body) runs one turn however often it is sent: a client that lost the answer (it dropped
the connection) and sends again gets that turn, attached while it runs and its recorded
answer after, and a filing asked for in it files once; duplicates sent together run one
turn; the same key with another message is a 422 that changes nothing. Before, every send
ran a turn of its own, and a filing sent twice filed twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.operators import authenticate
from bot.runtimes.base import Delta
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox, read_sse
from tests.fakes.lifecycle import wait_for
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.test_chat_file_noted import history

ASK = "file an issue for the flaky login test"
FILING = reply(
    "Filing it.",
    trailer='STEELFRAME_META: {"intent": "file_work", "title": "Flaky login test"}',
)


def issues(sandbox: GitHubSandbox) -> list[Any]:
    repo = sandbox.sandbox.world.repo(SANDBOX_REPO)
    return [issue for issue in repo.issues.values() if not issue.is_pull]


async def service(
    api_factory: Any, sandbox: GitHubSandbox, tmp_path: Path, redis_url: str, runtime: Any
) -> ApiClient:
    return await api_factory(
        sandbox.settings(tmp_path, redis_url=redis_url), runtimes=lambda agent: runtime
    )


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def test_a_send_again_after_a_dropped_answer_runs_one_turn_and_files_once(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([FILING], gate=gate)
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    stream = await api.post("/api/operator/chat/stream", json={"message": ASK}, headers=keyed("k1"))
    [started] = await read_sse(stream, until="status")
    await runtime.called.wait()
    stream.close()  # the client lost the connection mid-turn
    operator = api.services.db.call(authenticate, api.token).id
    handle = api.services.registry.for_operator(operator)
    assert handle is not None
    await wait_for(lambda: handle.watchers == 0)  # the dropped stream let go

    # It sends again, blocking this time: attached to the turn still running...
    again = asyncio.create_task(
        api.post("/api/operator/chat", json={"message": ASK}, headers=keyed("k1"))
    )
    await wait_for(lambda: handle.watchers == 1)
    gate.set()
    first = await again
    assert first.status == 200, await first.text()
    answer = await first.json()
    # ...and once more after it ended: its recorded answer, the same JSON.
    later = await api.post("/api/operator/chat", json={"message": ASK}, headers=keyed("k1"))
    assert later.status == 200
    assert await later.json() == answer
    # The stream, sent again, gives the turn's frames: its start and its answer.
    resent = await api.post("/api/operator/chat/stream", json={"message": ASK}, headers=keyed("k1"))
    frames = await read_sse(resent)
    assert frames[0]["turn_id"] == started["turn_id"] == answer["turn_id"]
    assert frames[-1]["type"] == "done" and frames[-1]["response"] == answer

    assert len(runtime.requests) == 1
    [issue] = issues(github_sandbox)
    assert answer["filed_issue_number"] == issue.number
    assert [m["role"] for m in await history(api, answer["session"])] == ["user", "assistant"]


async def test_the_request_id_field_is_a_key_too(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    runtime = ScriptedRuntime([FILING])
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    body = {"message": ASK, "request_id": "r-1"}
    first = await (await api.post("/api/operator/chat", json=body)).json()
    second = await (await api.post("/api/operator/chat", json=body)).json()
    assert first == second and len(runtime.requests) == 1 and len(issues(github_sandbox)) == 1


async def test_duplicates_sent_together_run_one_turn(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([FILING], gate=gate)
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    sends = [
        asyncio.create_task(
            api.post("/api/operator/chat", json={"message": ASK}, headers=keyed("twice"))
        )
        for _ in range(4)
    ]
    await runtime.called.wait()
    gate.set()
    answers = await asyncio.gather(*sends)

    assert [a.status for a in answers] == [200] * 4, [await a.text() for a in answers]
    bodies = [await a.json() for a in answers]
    assert all(body == bodies[0] for body in bodies)
    assert len(runtime.requests) == 1
    assert len(issues(github_sandbox)) == 1


@pytest.mark.parametrize("running", [True, False], ids=["while-running", "after-it-ended"])
async def test_the_same_key_with_another_message_is_refused_and_changes_nothing(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str, running: bool
) -> None:
    gate = asyncio.Event()
    if not running:
        gate.set()
    runtime = ScriptedRuntime([[Delta("Hello.")]], gate=gate)
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    first = asyncio.create_task(
        api.post("/api/operator/chat", json={"message": "hello"}, headers=keyed("k"))
    )
    await runtime.called.wait()
    if not running:
        await first

    other = await api.post(
        "/api/operator/chat", json={"message": "file an issue for X"}, headers=keyed("k")
    )

    assert other.status == 422
    error = await other.json()
    assert error["code"] == "idempotency_key_reused"
    assert error["detail"]["field"] == "Idempotency-Key"
    gate.set()
    done = await (await first).json()
    assert error["detail"]["session"] == done["session"]
    assert len(runtime.requests) == 1
    assert issues(github_sandbox) == []
    messages = await history(api, done["session"])
    assert [m["content"] for m in messages] == ["hello", "Hello."]


async def test_keys_are_the_operators_own(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    runtime = ScriptedRuntime([[Delta("Hello.")]])
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    other = api.new_operator("other")
    mine = await (
        await api.post("/api/operator/chat", json={"message": "hi"}, headers=keyed("same"))
    ).json()
    theirs = await (
        await other.post("/api/operator/chat", json={"message": "hi"}, headers=keyed("same"))
    ).json()
    assert mine["session"] != theirs["session"] and len(runtime.requests) == 2


async def test_a_keyed_turn_cut_by_a_shutdown_answers_its_cut_when_sent_again(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    """The service stopping cuts the turn (SIGTERM: bot.chat.inflight): sent again with its
    key, the message gets that end, the 503 that says to send it again (with a new key),
    and no second turn runs."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([FILING], gate=gate)
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    stream = await api.post("/api/operator/chat/stream", json={"message": ASK}, headers=keyed("c"))
    await read_sse(stream, until="status")
    await runtime.called.wait()

    await api.services.registry.shut_down(grace=0)

    assert (await read_sse(stream))[-1]["reason"] == "cancelled"
    again = await api.post("/api/operator/chat", json={"message": ASK}, headers=keyed("c"))
    assert again.status == 503
    assert (await again.json())["code"] == "turn_cancelled"
    assert len(runtime.requests) == 1 and issues(github_sandbox) == []


def _keyed_rows_saying(api: ApiClient, words: str) -> list[str]:
    """The stored keyed-turn rows (bot.chat.turn_keys) whose request or end says `words`."""
    from bot.idempotency import SideEffect

    rows = api.services.db.call(lambda s: s.query(SideEffect).all())
    return [row.key for row in rows if words in f"{row.request} {row.result}"]


@pytest.mark.parametrize("how", ["delete", "clear"])
async def test_a_deleted_or_cleared_session_keeps_nothing_of_its_keyed_turns(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str, how: str
) -> None:
    said = "the staging password is tangerine"
    runtime = ScriptedRuntime([reply("Noted."), reply("Noted again.")])
    api = await service(api_factory, github_sandbox, tmp_path, redis_url, runtime)
    first = await api.post("/api/operator/chat", json={"message": said}, headers=keyed("k-del"))
    session = (await first.json())["session"]
    assert _keyed_rows_saying(api, "tangerine")  # what the key answers a send again with

    if how == "delete":
        gone = await api.delete(f"/api/operator/chat/session/{session}")
    else:
        gone = await api.post("/api/operator/chat/clear", json={"session": session})
    assert gone.status == 200, await gone.text()

    assert _keyed_rows_saying(api, "tangerine") == []
    again = await api.post(
        "/api/operator/chat", json={"message": said, "session": session}, headers=keyed("k-del")
    )
    if how == "delete":  # a send again is a new send, into a session that is gone
        assert again.status == 404, await again.text()
        assert len(runtime.requests) == 1
    else:  # the session is empty: the message is asked again, not answered from the key
        assert again.status == 200, await again.text()
        assert (await again.json())["reply"] == "Noted again."
        assert len(runtime.requests) == 2
