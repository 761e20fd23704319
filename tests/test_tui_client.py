"""The TUI's HTTP side without the UI: the SSE reader, the operator client, the CLI."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult

from steelframe.cli import build_parser
from tests.conftest import ApiClient, make_settings, read_sse
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.ports import refused_port
from tests.fakes.proxy import LoopbackProxy
from tests.fakes.runtimes import ScriptedRuntime, reply
from tests.fakes.tui import chat_response, chat_session
from tui_client.__main__ import main, resolve
from tui_client.api import ApiError, OperatorClient, ServiceUnreachable, _api_error
from tui_client.chat_state import ChatState, status_line
from tui_client.errors_wire import ErrorDetail
from tui_client.events_wire import SessionFrame
from tui_client.reply import FinishedReply, Hit
from tui_client.sessions_wire import (
    Deleted,
    DeltaFrame,
    DoneFrame,
    ErrorFrame,
    Seen,
    StatusFrame,
)
from tui_client.sse import SseError, SseReader
from tui_client.transcript import AssistantMessage, hit_line


def client_for(api: ApiClient, token: str | None = None) -> OperatorClient:
    return api.operator_client(token=token or api.token)


# -- SSE reader ------------------------------------------------------------------------


def test_sse_reader_joins_frames_split_anywhere_even_inside_utf8_and_skips_heartbeats() -> None:
    wire = (
        b": keep-alive\n\n"
        b'id: 1\ndata: {"type":"status","text":"retrieve 1/3 \xc2\xb7 2 hits"}\n\n'
        b'id: 2\ndata: {"type":"delta","text":"hi"}\n\n'
    )
    for size in (1, 2, 3, 7, len(wire)):
        reader = SseReader()
        frames = []
        for start in range(0, len(wire), size):
            frames.extend(reader.feed(wire[start : start + size]))
        assert [f["id"] for f in frames] == [1, 2]
        assert frames[0]["text"] == "retrieve 1/3 · 2 hits"
        assert reader.last_event_id == 2


def test_sse_reader_accepts_crlf_cr_and_multiline_data() -> None:
    reader = SseReader()
    frames = reader.feed('id: 5\r\ndata: {"type":\r\ndata: "done"}\r')
    frames += reader.feed("\n\r\n")
    assert frames == [{"type": "done", "id": 5}]
    assert reader.feed('id: 9\rdata: {"id": 9, "type": "x"}\r\r') == [{"id": 9, "type": "x"}]
    assert reader.last_event_id == 9


def test_sse_reader_rejects_data_that_is_not_a_json_object() -> None:
    with pytest.raises(SseError, match="not JSON"):
        SseReader().feed("data: {oops\n\n")
    with pytest.raises(SseError, match="object"):
        SseReader().feed("data: [1]\n\n")


# -- client against the real service ---------------------------------------------------


async def test_client_streams_a_turn_and_lists_sessions(api: ApiClient) -> None:
    client = client_for(api)
    try:
        frames = [frame async for frame in client.turn("hello there")]
        first, last = frames[0].frame, frames[-1].frame
        assert isinstance(first, StatusFrame) and isinstance(last, DoneFrame)
        ids = [f.id for f in frames]  # consecutive from the turn's first id
        assert ids[0] is not None and ids == list(range(ids[0], ids[0] + len(frames)))
        session = last.response.session
        assert [s.id for s in await client.sessions()] == [session]
        detail = await client.session(session)
        assert [m.role for m in detail.messages] == ["user", "assistant"]
        discuss = await client.new_session(title="Discuss #3", issue=3)
        assert discuss.focus == 3
        assert await client.mark_seen(discuss.id) == Seen(session=discuss.id, unseen=False)
        assert await client.delete_session(session) == Deleted(deleted=session)
        assert [s.id for s in await client.sessions()] == [discuss.id]
    finally:
        await client.close()


async def test_a_message_at_its_character_limit_goes_through_in_any_script(
    api: ApiClient,
) -> None:
    """32,000 characters is the limit, whatever they are: CJK text (three bytes each in
    UTF-8; six as the \\uXXXX escapes the TUI used to send) and emoji (four; twelve escaped)
    were refused as too large a body far below it."""
    client = client_for(api)
    try:
        for text in ("漢" * 32_000, "🙂" * 32_000):
            frames = [frame async for frame in client.turn(text)]
            done = frames[-1].frame
            assert isinstance(done, DoneFrame), done
            assert done.response.history[-2].content == text  # the operator's, whole
    finally:
        await client.close()
    # Escaped as plain json.dumps does, CJK at the limit still fits the default body.
    escaped = await api.post(
        "/api/operator/chat",
        data=json.dumps({"message": "漢" * 32_000}),
        headers={"Content-Type": "application/json"},
    )
    assert escaped.status == 200, await escaped.text()


async def test_client_reattaches_after_the_last_frame_id_it_saw(
    api_factory: Any, tmp_path: Path
) -> None:
    runtime = ScriptedRuntime([reply("one two three four five six", pieces=6)])
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    client = client_for(api)
    try:
        frames = [frame async for frame in client.turn("count")]
        done = frames[-1].frame
        assert isinstance(done, DoneFrame)
        seen = frames[2].id  # the client saw three frames, then lost the stream
        assert seen is not None
        replay = [frame async for frame in client.resume(done.response.session, last_event_id=seen)]
        assert [f.id for f in replay] == [f.id for f in frames[3:]]
    finally:
        await client.close()


async def test_client_resumes_a_stream_that_breaks_mid_frame_without_loss_or_doubling(
    api: ApiClient,
) -> None:
    proxy = LoopbackProxy(api.raw.port)
    client = api.operator_client(url=await proxy.start())
    try:
        frames = [frame async for frame in client.turn("tell me everything")]
    finally:
        await client.close()
        await proxy.close()
    assert proxy.connections >= 2
    ids = [f.id for f in frames]  # no frame lost or doubled across the re-attach
    assert ids[0] is not None and ids == list(range(ids[0], ids[0] + len(frames)))
    done = frames[-1].frame
    assert isinstance(done, DoneFrame)
    streamed = "".join(f.frame.text for f in frames if isinstance(f.frame, DeltaFrame))
    assert done.response.reply == streamed.strip()


async def test_client_errors_carry_the_service_error_body(api: ApiClient) -> None:
    client = client_for(api)
    try:
        with pytest.raises(ApiError) as missing:
            await client.session("0123abcd")
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        with pytest.raises(ApiError) as bad:
            await client.new_session(issue=0)
        assert bad.value.status == 400 and bad.value.detail == ErrorDetail(field="issue")
        with pytest.raises(ApiError) as empty:
            [frame async for frame in client.turn("   ")]
        assert empty.value.message == "message is required"
    finally:
        await client.close()


async def test_client_wrong_token_is_unauthorized(api: ApiClient) -> None:
    client = client_for(api, token="sfo_wrong")
    try:
        with pytest.raises(ApiError) as refused:
            await client.sessions()
        assert refused.value.unauthorized and refused.value.message == "invalid bearer token"
    finally:
        await client.close()


async def test_client_unreachable_service_is_one_clear_error() -> None:
    port = refused_port()
    client = OperatorClient(f"http://127.0.0.1:{port}", "sfo_x")
    try:
        with pytest.raises(ServiceUnreachable, match=f"127.0.0.1:{port}: connection refused"):
            await client.sessions()
        with pytest.raises(ServiceUnreachable):
            [frame async for frame in client.turn("hi")]
    finally:
        await client.close()
    assert "sfo_x" not in repr(client)


async def test_client_stop_reaches_the_running_turn(api_factory: Any, tmp_path: Path) -> None:
    gate = asyncio.Event()
    runtime = ScriptedRuntime([reply("never")], gate=gate)
    api = await api_factory(make_settings(tmp_path), runtimes=lambda agent: runtime)
    client = client_for(api)
    try:
        stream = client.turn("wait")
        first = await anext(stream)
        assert isinstance(first.frame, StatusFrame)
        with pytest.raises(ApiError) as busy:  # one turn at a time: the 409 names the running one
            [frame async for frame in client.turn("and this")]
        assert (busy.value.status, busy.value.code) == (409, "conflict")
        assert busy.value.detail is not None and busy.value.detail.turn_id == first.frame.turn_id
        stopped = await client.stop()
        assert stopped.stopped is True and stopped.turn_id == first.frame.turn_id
        rest = [frame async for frame in stream]
        end = rest[-1].frame
        assert isinstance(end, ErrorFrame) and end.reason == "stopped"
        assert (await client.stop()).stopped is False  # no turn in flight: the short answer
    finally:
        await client.close()


def test_an_error_body_the_tui_cannot_fully_read_still_gives_its_message() -> None:
    """A `detail` of another shape (a newer service's) is left out, the message kept; an
    answer that is not the service's JSON (a proxy's page) is its status and reason."""
    odd = _api_error(400, "Bad Request", b'{"error": "no", "code": "bad_request", "detail": 7}')
    assert (odd.code, odd.message, odd.detail) == ("bad_request", "no", None)
    more = b'{"error": "busy", "detail": {"retry_after": 5, "shard": [1]}}'
    busy = _api_error(503, "Service Unavailable", more)
    assert (busy.code, busy.detail) == ("http_error", ErrorDetail(retry_after=5))
    page = _api_error(502, "Bad Gateway", b"<html>upstream down</html>")
    assert (page.status, page.code, page.message, page.detail) == (
        502,
        "http_error",
        "Bad Gateway",
        None,
    )


# -- status line and hits --------------------------------------------------------------


def test_status_line_prefers_the_decision_only_with_an_empty_composer() -> None:
    state = ChatState(
        title="Discuss #9", focus=9, decision_body="Ship it", decision_issue=9, intent="decide"
    )
    assert status_line(state, composer_empty=True) == "Chat · Decision draft · P publish to #9"
    assert status_line(state, composer_empty=False) == "Chat · Discuss #9 · focused on #9"
    state.pending_title = "left over"  # a decide turn never prompts to file
    assert "press y to file" not in status_line(state, composer_empty=True)
    state.clear_decision()
    assert "press y to file" not in status_line(state, composer_empty=True)


def test_status_line_offers_y_for_a_pending_proposal_and_shows_phases() -> None:
    state = ChatState(title="CI", pending_title="Fix flaky CI", intent="propose_work")
    assert (
        status_line(state, composer_empty=True)
        == 'Chat · Proposal "Fix flaky CI" · press y to file'
    )
    state.busy, state.phase = True, "retrieve 1/3 · 2 hits"
    assert status_line(state, composer_empty=True) == "Chat · retrieve 1/3 · 2 hits · esc stop"
    state.offline = "token refused"
    assert status_line(state, composer_empty=True) == "Chat · token refused · ctrl+r retry"


def test_finished_decide_turn_drops_any_proposal() -> None:
    state = ChatState()
    state.finish_turn(
        chat_response(
            session="s1", intent="decide", decision_body="Go", decision_issue=4, pending_title="x"
        )
    )
    assert state.has_decision and not state.can_file and state.session_id == "s1"


def test_hit_line_shows_source_score_issue_and_preview() -> None:
    hit = {"source": "session", "score": 0.5, "issue": 12, "preview": "first\n  second"}
    assert hit_line(Hit.stored(hit)) == "session · score 0.50 · #12 · first second"
    assert hit_line(Hit.stored({"source": "summary", "session_id": "abc"})) == (
        "summary · session abc"
    )


# -- command line ----------------------------------------------------------------------


def _args(**values: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"url": None, "token": None, **values})


def test_url_and_token_come_from_flags_then_environment() -> None:
    env = {"STEELFRAME_URL": "http://svc:9000", "STEELFRAME_TOKEN": "sfo_env"}
    assert resolve(_args(), env) == ("http://svc:9000", "sfo_env")
    assert resolve(_args(url="https://x", token="sfo_flag"), env) == ("https://x", "sfo_flag")
    assert resolve(_args(), {"STEELFRAME_TOKEN": "t"}) == ("http://127.0.0.1:8080", "t")


def test_missing_token_or_bad_url_exits_2_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STEELFRAME_TOKEN", raising=False)
    monkeypatch.delenv("STEELFRAME_URL", raising=False)
    assert main([]) == 2
    assert "no operator token: pass --token or set STEELFRAME_TOKEN" in capsys.readouterr().err
    assert main(["--url", "localhost:8080", "--token", "t"]) == 2
    assert "--url must start with http:// or https://" in capsys.readouterr().err


def test_steelframe_tui_subcommand_takes_the_same_options() -> None:
    argv = ["tui", "--url", "http://h:1", "--token", "sfo_t"]
    args = build_parser(argv).parse_args(argv)
    assert (args.url, args.token) == ("http://h:1", "sfo_t")
    assert args.handler.__module__ == "steelframe.commands.tui"


async def test_recency_fallback_row_says_there_were_no_semantic_hits() -> None:
    message = AssistantMessage(streaming=False)

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield message

    recent = {"source": "chat_summary", "score": None, "session_id": "ab12", "preview": "Asked: x"}
    async with Host().run_test() as pilot:
        await message.finish(FinishedReply("hi", hits=[Hit.stored(recent)], hit_count=0))
        await pilot.pause()
        assert message.hits is not None
        assert (
            message.hits.title == "retrieve 0 hits · (no semantic hits) 1 recent summary (ctrl+g)"
        )
        assert [str(s.render()) for s in message.hits.query(".hit")] == [
            "chat_summary · session ab12 · Asked: x"
        ]


async def test_closing_the_client_ends_its_events_stream(api: ApiClient) -> None:
    """The TUI closes its client as it exits: the events stream it was reading then ends
    instead of failing (aiohttp raises a bare RuntimeError for a read after the close)."""
    client = client_for(api)
    events = client.events()
    first = asyncio.create_task(anext(events))
    await read_sse(await api.post("/api/operator/chat/stream", json={"message": "hello"}))
    assert isinstance(await asyncio.wait_for(first, PATIENCE_SECONDS), SessionFrame)
    await client.close()  # between two reads
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(events), 30)


def test_opening_a_session_leaves_the_running_turn_and_the_switch_to_the_panel() -> None:
    """`busy` belongs to the turn in flight: adopting (or forgetting) a session must not end
    it, or the turn streams on with no `esc stop` and a second message races it."""
    state = ChatState(busy=True, phase="replying", switching=True, held="hello")
    state.open_session(chat_session(id="s2"))
    assert (state.session_id, state.busy, state.phase) == ("s2", True, "replying")
    state.reset()
    assert state.session_id is None and state.busy and state.held == "hello"
    state.busy = False
    assert status_line(state, composer_empty=True) == (
        "Chat · opening the chat… · your message is sent to it once it is open"
    )
    state.held = None
    assert status_line(state, composer_empty=True) == "Chat · opening the chat…"
