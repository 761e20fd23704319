"""Turn lifecycle through the real API: stop, resume, delete, concurrency, caps, trailer."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from bot.runtimes.base import Delta, Thinking
from tests.conftest import ApiClient, frames_until, make_settings, read_sse
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.runtimes import ScriptedRuntime, reply


async def _api_with(
    api_factory: Any, tmp_path: Path, runtime: ScriptedRuntime, **overrides: Any
) -> ApiClient:
    return await api_factory(make_settings(tmp_path, **overrides), runtimes=lambda agent: runtime)


async def _message_count(api: ApiClient) -> int:
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    return sum(s["turns"] or 0 for s in sessions)


async def test_stop_cancels_the_model_call_and_persists_nothing(
    api_factory: Any, tmp_path: Path
) -> None:
    slow = ScriptedRuntime([[Delta(f"word{i} ") for i in range(200)]], delay=0.02)
    api = await _api_with(api_factory, tmp_path, slow)
    response = await api.post("/api/operator/chat/stream", json={"message": "long answer please"})
    first = await frames_until(response, lambda f: f["type"] == "delta")
    assert first[-1]["type"] == "delta"
    stopped = await (await api.post("/api/operator/chat/stop")).json()
    assert stopped["stopped"] is True
    rest = await read_sse(response)
    assert rest[-1] == {**rest[-1], "type": "error", "reason": "stopped"}
    assert slow.cancelled.is_set()
    assert await _message_count(api) == 0
    # the next message starts fresh and is answered in full
    fast = await (await api.post("/api/operator/chat", json={"message": "again"})).json()
    assert next(m["content"] for m in fast["history"]) == "again"


async def test_stop_with_nothing_in_flight_says_so(api: ApiClient) -> None:
    assert await (await api.post("/api/operator/chat/stop")).json() == {"stopped": False}


async def test_second_concurrent_send_is_409_and_changes_nothing(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("done at last")], gate=gate)
    api = await _api_with(api_factory, tmp_path, runtime)
    first = await api.post("/api/operator/chat/stream", json={"message": "first"})
    await frames_until(first, lambda f: f["type"] == "status")
    second = await api.post("/api/operator/chat", json={"message": "second", "focus": 5})
    assert second.status == 409
    body = await second.json()
    assert body["code"] == "conflict" and body["detail"]["session"]
    gate.set()
    frames = await read_sse(first)
    assert frames[-1]["type"] == "done"
    history = await (await api.get("/api/operator/chat")).json()
    assert [m["content"] for m in history["messages"]] == ["first", "done at last"]
    session = await (await api.get(f"/api/operator/chat/session/{history['session']}")).json()
    assert session["focus"] is None  # the refused send did not apply its focus


async def test_disconnect_then_resume_with_last_event_id_loses_and_doubles_nothing(
    api_factory: Any, tmp_path: Path
) -> None:
    words = [Delta(f"w{i} ") for i in range(40)]
    runtime = ScriptedRuntime([[Thinking("plan"), *words]], delay=0.01)
    api = await _api_with(api_factory, tmp_path, runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": "stream it"})
    seen = await frames_until(response, lambda f: f["type"] == "delta" and f["text"] == "w3 ")
    session = response.headers["X-Steelframe-Session"]
    response.close()  # the client goes away mid-turn
    last = seen[-1]["id"]
    resumed = await api.get(
        f"/api/operator/chat/stream?session={session}", headers={"Last-Event-ID": str(last)}
    )
    assert resumed.status == 200
    rest = await read_sse(resumed)
    frames = seen + rest
    first = frames[0]["id"]
    assert [f["id"] for f in frames] == list(range(first, first + len(frames)))
    text = "".join(f["text"] for f in frames if f["type"] == "delta")
    assert text.split() == [f"w{i}" for i in range(40)]
    assert frames[-1]["type"] == "done"
    history = await (await api.get(f"/api/operator/chat?session={session}")).json()
    assert len(history["messages"]) == 2  # persisted once


async def test_turn_finishes_and_persists_when_client_disconnects(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime([reply("finished without you", pieces=10)], delay=0.02)
    api = await _api_with(api_factory, tmp_path, runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": "go"})
    await frames_until(response, lambda f: f["type"] == "status")
    session = response.headers["X-Steelframe-Session"]
    response.close()
    handle = api.services.registry.for_operator(_operator_id(api))
    assert handle is not None and handle.task is not None
    await asyncio.wait_for(asyncio.shield(handle.task), timeout=PATIENCE_SECONDS)
    history = await (await api.get(f"/api/operator/chat?session={session}")).json()
    assert history["messages"][-1]["content"] == "finished without you"


def _operator_id(api: ApiClient) -> int:
    from bot.operators import authenticate

    return api.services.db.call(authenticate, api.token).id


async def test_resume_unknown_or_bad_is_clear(api: ApiClient) -> None:
    assert (await api.get("/api/operator/chat/stream?session=abc123")).status == 404
    response = await api.get(
        "/api/operator/chat/stream?session=abc123", headers={"Last-Event-ID": "x"}
    )
    assert response.status in (400, 404)


async def test_deleting_the_session_of_a_running_turn_stops_it_and_writes_nothing(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("too late")], gate=gate)
    api = await _api_with(api_factory, tmp_path, runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": "doomed"})
    await frames_until(response, lambda f: f["type"] == "status")
    session = response.headers["X-Steelframe-Session"]
    assert (await api.delete(f"/api/operator/chat/session/{session}")).status == 200
    frames = await read_sse(response)
    assert frames[-1]["type"] == "error" and frames[-1]["reason"] == "stopped"
    assert (await api.get(f"/api/operator/chat/session/{session}")).status == 404
    assert _turn_rows(api) == 0


async def test_a_session_deleted_elsewhere_mid_turn_fails_closed(
    api_factory: Any, tmp_path: Path
) -> None:
    """Deleted through another instance (which cannot stop this turn): the turn finishes
    but writes nothing, no orphan rows."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("too late")], gate=gate)
    settings = make_settings(tmp_path)
    api = await api_factory(settings, runtimes=lambda agent: runtime)
    elsewhere = (await api_factory(settings)).as_operator(api.token)
    response = await api.post("/api/operator/chat/stream", json={"message": "doomed"})
    await frames_until(response, lambda f: f["type"] == "status")
    session = response.headers["X-Steelframe-Session"]
    # The first frame goes out before the session is written; the turn's own instance
    # answers once it is (another one may not see it for the batched write's few ms).
    assert (await api.get(f"/api/operator/chat/session/{session}")).status == 200
    assert (await elsewhere.delete(f"/api/operator/chat/session/{session}")).status == 200
    gate.set()
    frames = await read_sse(response)
    assert frames[-1]["type"] == "error" and frames[-1]["reason"] == "session_deleted"
    assert _turn_rows(api) == 0


async def test_new_chat_and_clear_wait_for_the_running_turn(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    api = await _api_with(api_factory, tmp_path, ScriptedRuntime([reply("ok")], gate=gate))
    response = await api.post("/api/operator/chat/stream", json={"message": "busy"})
    await frames_until(response, lambda f: f["type"] == "status")
    assert (await api.post("/api/operator/chat/new", json={})).status == 409
    assert (await api.post("/api/operator/chat/clear")).status == 409
    gate.set()
    assert (await read_sse(response))[-1]["type"] == "done"
    assert (await api.post("/api/operator/chat/new", json={})).status == 201


async def test_stop_after_the_model_answered_lets_the_turn_finish(
    api_factory: Any, tmp_path: Path
) -> None:
    """Once the answer is in, stop would lose a half-applied intent: the turn completes."""
    api = await _api_with(api_factory, tmp_path, ScriptedRuntime([reply("answered")]))
    committing = asyncio.Event()
    release = asyncio.Event()
    original = api.services.chat_turns.policy

    class SlowPolicy:
        async def apply(self, ctx: Any) -> Any:
            committing.set()
            await release.wait()
            return await original.apply(ctx)

    api.services.chat_turns.policy = SlowPolicy()
    response = await api.post("/api/operator/chat/stream", json={"message": "go"})
    await committing.wait()
    stopped = await (await api.post("/api/operator/chat/stop")).json()
    assert stopped["stopped"] is False and stopped["reason"] == "finishing"
    release.set()
    assert (await read_sse(response))[-1]["type"] == "done"
    assert _turn_rows(api) == 2


def _turn_rows(api: ApiClient) -> int:
    from sqlalchemy import func, select

    from bot.models import ChatTurn

    return int(api.services.db.call(lambda s: s.scalar(select(func.count()).select_from(ChatTurn))))


async def test_reasoning_is_streamed_capped_and_returned_on_reopen(
    api_factory: Any, tmp_path: Path
) -> None:
    long_thought = "t" * 15_000
    runtime = ScriptedRuntime(
        [[Thinking(long_thought[:7_000]), Thinking(long_thought[7_000:]), Delta("answer")]]
    )
    api = await _api_with(api_factory, tmp_path, runtime)
    response = await api.post("/api/operator/chat/stream", json={"message": "think hard"})
    frames = await read_sse(response)
    thinking = "".join(f["text"] for f in frames if f["type"] == "thinking")
    assert thinking == long_thought
    done = frames[-1]["response"]
    assert done["reply"] == "answer" and "t" not in done["reply"]
    assert len(done["reasoning"]) == 12_000
    reopened = await (await api.get(f"/api/operator/chat/session/{done['session']}")).json()
    assert len(reopened["messages"][1]["reasoning"]) == 12_000
    assert reopened["messages"][1]["content"] == "answer"


async def test_trailer_split_across_deltas_is_never_shown_or_stored(
    api_factory: Any, tmp_path: Path
) -> None:
    pieces = ["Here is the plan.", "\nSTEELF", "RAME_", 'META: {"intent": "st', 'atus"}']
    runtime = ScriptedRuntime([[Delta(p) for p in pieces]])
    api = await _api_with(api_factory, tmp_path, runtime)
    frames = await read_sse(
        await api.post("/api/operator/chat/stream", json={"message": "status?"})
    )
    streamed = "".join(f["text"] for f in frames if f["type"] == "delta")
    assert "META" not in streamed and "STEELF" not in streamed
    done = frames[-1]["response"]
    assert done["reply"] == "Here is the plan." and done["intent"] == "status"
    stored = await (await api.get("/api/operator/chat")).json()
    assert all("STEELFRAME_META" not in m["content"] for m in stored["messages"])


async def test_malformed_trailer_is_intent_answer(api_factory: Any, tmp_path: Path) -> None:
    runtime = ScriptedRuntime([[Delta('Fine.\nSTEELFRAME_META: {"intent": "file_work", broken')]])
    api = await _api_with(api_factory, tmp_path, runtime)
    body = await (await api.post("/api/operator/chat", json={"message": "hi"})).json()
    assert body["intent"] == "answer" and body["reply"] == "Fine."


async def test_heartbeat_comments_while_the_model_is_silent(
    api_factory: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("eventually")], gate=gate)
    api = await _api_with(api_factory, tmp_path, runtime, heartbeat_seconds=0.05)
    response = await api.post("/api/operator/chat/stream", json={"message": "wait"})
    lines: list[str] = []
    async for raw in response.content:
        lines.append(raw.decode())
        if lines[-1].startswith(": keep-alive"):
            break
    gate.set()
    assert (await read_sse(response))[-1]["type"] == "done"


async def test_blocking_endpoint_maps_runtime_failure_to_502(
    api_factory: Any, tmp_path: Path
) -> None:
    from bot.runtimes.base import RuntimeError_

    class Failing(ScriptedRuntime):
        async def stream(self, request: Any) -> Any:  # type: ignore[override]
            raise RuntimeError_("model endpoint refused the connection")
            yield  # pragma: no cover

    api = await _api_with(api_factory, tmp_path, Failing([[]]))
    response = await api.post("/api/operator/chat", json={"message": "hi"})
    assert response.status == 502
    assert (await response.json())["error"] == "model endpoint refused the connection"
    assert await _message_count(api) == 0


async def test_the_first_frame_goes_out_while_another_writer_holds_the_database(
    api_factory: Any, tmp_path: Path
) -> None:
    """The first frame names the turn's session before the session is written (1,000
    turns starting at once would otherwise queue their first frames on SQLite's one
    writer): a writer holding the lock delays the turn's work, not its first frame."""
    api = await _api_with(api_factory, tmp_path, ScriptedRuntime([reply("answered")]))
    writer = sqlite3.connect(tmp_path / "steelframe.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held by another connection
    try:
        response = await api.post("/api/operator/chat/stream", json={"message": "hello"})
        [first] = await frames_until(response, lambda f: True)
        assert first["type"] == "status" and first["text"] == "turn started"
        assert first["session"] == response.headers["X-Steelframe-Session"]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    frames = await read_sse(response)
    assert frames[-1]["type"] == "done"
    history = await (await api.get(f"/api/operator/chat?session={first['session']}")).json()
    assert [m["content"] for m in history["messages"]] == ["hello", "answered"]


async def test_a_session_names_its_running_turn_and_the_turn_its_message(
    api_factory: Any, tmp_path: Path
) -> None:
    """A client reopening a session re-attaches only to a turn still running (no replay of a
    finished one, no 404 to find out), and shows the operator's message from its first frame."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("held answer")], gate=gate)
    api = await _api_with(api_factory, tmp_path, runtime)
    idle = await (await api.post("/api/operator/chat/new", json={"title": "idle"})).json()
    await api.post("/api/operator/chat/new", json={"title": "busy"})  # the active one
    running = await api.post("/api/operator/chat/stream", json={"message": "still thinking?"})
    first = (await frames_until(running, lambda f: f["type"] == "status"))[0]
    assert first["message"] == "still thinking?"
    sid, turn = first["session"], first["turn_id"]
    opened = await (await api.post(f"/api/operator/chat/session/{sid}/open")).json()
    assert opened["turn_in_flight"] == turn
    other = await (await api.get(f"/api/operator/chat/session/{idle['id']}")).json()
    assert other["turn_in_flight"] is None  # the running turn is not that session's
    gate.set()
    assert (await read_sse(running))[-1]["type"] == "done"
    after = await (await api.get(f"/api/operator/chat/session/{sid}")).json()
    assert after["turn_in_flight"] is None
    assert [m["content"] for m in after["messages"]] == ["still thinking?", "held answer"]


async def test_a_turn_stored_but_not_yet_let_go_is_not_named_as_running(
    api_factory: Any, tmp_path: Path
) -> None:
    """A turn stores its messages, then lets go of its slot. A client reading the session in
    between re-attached to the turn and showed its stored reply as well: twice (seen in the
    TUI once its connection came back). The read names a running turn only while the
    session does not hold it."""
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("the answer")], gate=gate)
    api = await _api_with(api_factory, tmp_path, runtime)
    running = await api.post("/api/operator/chat/stream", json={"message": "why?"})
    first = (await frames_until(running, lambda f: f["type"] == "status"))[0]
    sid, turn = first["session"], first["turn_id"]
    handle = api.services.registry.held(turn)
    assert handle is not None and handle.before_terminal is not None
    stored, let_go = asyncio.Event(), asyncio.Event()
    release = handle.before_terminal

    async def held_between(turn_handle: Any) -> None:  # the turn's messages are stored now
        stored.set()
        await let_go.wait()
        await release(turn_handle)

    handle.before_terminal = held_between
    gate.set()
    await asyncio.wait_for(stored.wait(), PATIENCE_SECONDS)
    try:
        assert api.services.registry.busy(handle.operator_id) is handle  # still running
        for read in (
            api.get(f"/api/operator/chat/session/{sid}"),
            api.post(f"/api/operator/chat/session/{sid}/open"),
        ):
            session = await (await read).json()
            assert [m["content"] for m in session["messages"]] == ["why?", "the answer"]
            assert session["turn_in_flight"] is None
    finally:
        let_go.set()
    assert (await read_sse(running))[-1]["type"] == "done"
