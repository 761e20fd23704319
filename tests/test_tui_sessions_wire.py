"""The TUI's copy of the chat's JSON (tui_client/sessions_wire.py: the sessions, a turn's
frames and its `done` response, the keys of a message's `meta` it shows, the answers to
seen, delete, stop, publish and file) is generated from bot/contracts/chat.py and
actions.py, holds the same fields (and tags) as the service's Structs, reads every key the
service sends, and still reads the answers of a newer service that sends more."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any

import msgspec
import pytest

from bot.contracts import actions, chat, wire_copies
from bot.contracts.chat_sessions_wire import COPY
from bot.contracts.turn_meta import TurnMeta
from tests.fakes.wire_shapes import differences, with_extras
from tui_client import sessions_wire, turn_frames
from tui_client.reply import FinishedReply
from tui_client.sse import SseError


def test_the_tui_sessions_json_is_generated_from_the_structs() -> None:
    assert COPY.tui_file.read_text() == COPY.render_python(), (
        "run `make wire`: tui_client/sessions_wire.py differs from bot/contracts/chat.py"
    )


def test_each_tui_class_has_the_services_fields_keys_and_order() -> None:
    names = [kind.__name__ for kind in COPY.wire_types()]
    assert {"Sessions", "ListedSession", "Session", "NewSession", "Message"} <= set(names)
    assert {"ChatResponse", "RetrievedHit", "TurnMeta"} <= set(names)
    assert {kind.__name__ for kind in chat.FRAME_TYPES} <= set(names)
    assert {"Seen", "Deleted", "StopResult", "Published", "Filed"} <= set(names)
    for server in COPY.wire_types():
        client = getattr(sessions_wire, server.__name__)
        assert differences(client, server, COPY.keys.get(server)) == [], server.__name__


def test_the_comparison_fails_on_a_renamed_or_dropped_field() -> None:
    """What the test above would say if the service renamed or dropped a field."""
    fields = [(f.name, f.type) for f in msgspec.structs.fields(chat.Message)]
    renamed = msgspec.defstruct("Message", [("message_id", str), *fields[1:]])
    dropped = msgspec.defstruct("Message", fields[:-1])
    assert differences(sessions_wire.Message, renamed) == [
        "TUI ('id', 'id', True) != service ('message_id', 'message_id', True)"
    ]
    assert differences(sessions_wire.Message, dropped) == [
        "only one side has ('created_at', 'created_at', True)"
    ]
    fields = [(f.name, f.type) for f in msgspec.structs.fields(chat.ChatResponse)]
    dropped = msgspec.defstruct("ChatResponse", [f for f in fields if f[0] != "filed_issue_url"])
    assert (
        "TUI ('filed_issue_url', 'filed_issue_url', True) != service "
        in (differences(sessions_wire.ChatResponse, dropped)[0])
    )


def _copied_structs() -> list[type[msgspec.Struct]]:
    return [
        kind
        for kind in COPY.wire_types()
        if issubclass(kind, msgspec.Struct) and msgspec.structs.fields(kind)
    ]


def _fields(kind: type[msgspec.Struct]) -> list[tuple[str, Any] | tuple[str, Any, Any]]:
    """A Struct's fields as `msgspec.defstruct` takes them (a default kept)."""
    return [
        (f.name, f.type) if f.required else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(kind)
    ]


@pytest.mark.parametrize("server", _copied_structs(), ids=lambda kind: kind.__name__)
def test_a_renamed_or_dropped_field_of_any_copied_struct_is_a_difference(
    server: type[msgspec.Struct],
) -> None:
    """Of every Struct copied (a frame, an action's answer...): what the test above would say
    if the service renamed its first field or dropped its last one."""
    client = getattr(sessions_wire, server.__name__)
    config = server.__struct_config__
    tagged = {"tag_field": config.tag_field, "tag": config.tag} if config.tag_field else {}
    fields = _fields(server)
    first, last = msgspec.structs.fields(server)[0], msgspec.structs.fields(server)[-1]
    renamed_field = (f"{first.name}_renamed", *fields[0][1:])
    renamed = msgspec.defstruct(server.__name__, [renamed_field, *fields[1:]], **tagged)
    dropped = msgspec.defstruct(server.__name__, fields[:-1], **tagged)
    assert differences(client, msgspec.defstruct(server.__name__, fields, **tagged)) == []
    was = (first.name, first.encode_name, first.required)
    now = (f"{first.name}_renamed", f"{first.name}_renamed", first.required)
    assert differences(client, renamed) == [f"TUI {was} != service {now}"]
    gone = (last.name, last.encode_name, last.required)
    assert differences(client, dropped) == [f"only one side has {gone}"]


def test_a_frame_type_the_service_renames_is_a_difference() -> None:
    fields = _fields(chat.DeltaFrame)
    renamed = msgspec.defstruct("DeltaFrame", fields, tag_field="type", tag="chunk")
    assert differences(sessions_wire.DeltaFrame, renamed) == [
        "TUI tag ('type', 'delta') != service tag ('type', 'chunk')"
    ]


def test_the_tui_frame_union_is_the_services() -> None:
    """Same members, same order, same tags: one decoder reads any frame the service sends."""
    theirs = [(kind.__name__, kind.__struct_config__.tag) for kind in typing.get_args(chat.Frame)]
    mine = [
        (kind.__name__, kind.__struct_config__.tag) for kind in typing.get_args(sessions_wire.Frame)
    ]
    assert mine == theirs and turn_frames.KNOWN == {tag for _, tag in theirs}


def test_a_union_that_is_not_one_tagged_union_stops_the_generator() -> None:
    untagged = dataclasses.replace(COPY, unions={"Either": chat.Seen | chat.Deleted})
    with pytest.raises(TypeError, match="not one tagged union"):
        wire_copies.render_python(untagged)


def test_a_meta_key_the_tui_shows_that_the_service_renames_or_drops_stops_the_generator() -> None:
    """The meta is copied in part: a key it names that TurnMeta no longer has fails `make
    wire` and the test above, rather than leaving the TUI reading a key never sent."""
    renamed = dataclasses.replace(COPY, keys={TurnMeta: ("retrieve_hits", "retrieved_hits")})
    with pytest.raises(TypeError, match="TurnMeta has no key retrieved_hits: the TUI reads it"):
        wire_copies.render_python(renamed)


def _summary() -> dict[str, Any]:
    return {
        "id": "s1",
        "title": "Flaky login",
        "label": "Flaky login test",
        "kind": "discuss",
        "agent": "default",
        "focus": 7,
        "created_at": "t",
        "last_activity_at": "t",
        "closed_at": None,
        "summary": "s",
        "summary_status": "done",
        "decision": {"body": "Ship it", "issue": 7},
        "pending": {"title": "Fix the login", "body": None, "kind": "work"},
        "turns": 2,
        "active": True,
    }


def _session() -> dict[str, Any]:
    """A session with every object its JSON can hold present, and a message's meta."""
    meta = {
        "model": "m",
        "retrieve_hits": 1,
        "retrieved": [{"source": "issue", "score": 0.5, "issue": 3, "preview": "p"}],
        "memory_verdict": "answers",
        "filed": {"number": 12, "url": "u", "task_started": True},
        "notes": ["a note"],
        "issue": {
            "repo": "o/r",
            "number": 7,
            "title": "t",
            "state": "open",
            "labels": [],
            "url": "u",
            "comments": 0,
            "pull": None,
        },
    }
    message = {
        "id": "m1",
        "seq": 1,
        "role": "assistant",
        "content": "Done.",
        "reasoning": "why",
        "intent": "file",
        "meta": meta,
        "created_at": "t",
    }
    return {**_summary(), "messages": [message], "turn_in_flight": "turn-1"}


def test_the_tui_reads_every_key_the_service_sends_as_sent() -> None:
    """Every key, in the order it was sent; of a message's meta, the keys the TUI shows."""
    session = _session()
    sent = chat.encode(msgspec.convert(session, chat.Session))
    read = msgspec.json.decode(sent, type=sessions_wire.Session)
    meta = session["messages"][0]["meta"]
    shown = {key: value for key, value in meta.items() if key in COPY.keys[TurnMeta]}
    assert read.messages[0].meta == shown and len(shown) == 5 < len(meta)
    session["messages"][0]["meta"] = shown
    assert msgspec.json.encode(read) == chat.encode(msgspec.convert(session, chat.Session))
    assert read.decision is not None and read.decision.issue == 7
    shown = FinishedReply.stored(read.messages[0])
    assert shown.filed is not None and shown.filed.number == 12
    listed = chat.Sessions(
        sessions=[msgspec.convert({**_summary(), "unseen": True}, chat.ListedSession)]
    )
    sent = chat.encode(listed)
    assert msgspec.json.encode(msgspec.json.decode(sent, type=sessions_wire.Sessions)) == sent
    new = msgspec.convert({**_summary(), "previous_session": "s0"}, chat.NewSession)
    sent = chat.encode(new)
    assert msgspec.json.encode(msgspec.json.decode(sent, type=sessions_wire.NewSession)) == sent


def test_a_newer_services_keys_and_words_do_not_break_the_tui() -> None:
    newer = with_extras(_session())
    newer["kind"] = "review"  # words this TUI's service did not have
    newer["messages"][0]["role"] = "tool"
    raw = json.dumps(newer).encode()
    read = msgspec.json.decode(raw, type=sessions_wire.Session)
    assert (read.kind, read.messages[0].role) == ("review", "tool")
    assert read.pending is not None and read.pending.title == "Fix the login"
    try:
        msgspec.json.decode(raw, type=chat.Session)
    except msgspec.ValidationError:
        pass  # the service's own Structs refuse unknown keys: the TUI's must not
    else:
        raise AssertionError("the service's Structs accepted unknown keys")


def _response() -> dict[str, Any]:
    """A `done` frame's response with every object its JSON can hold present."""
    hit = {
        "id": 4,
        "source": "issue",
        "score": 0.5,
        "coverage": 1.0,
        "repo": "o/r",
        "issue": 3,
        "session_id": None,
        "paths": ["a.py"],
        "created_at": None,
        "links": [],
        "preview": "p",
        "text": "t",
        "round": "message",
        "strength": "strong",
    }
    return {
        "reply": "Done.",
        "intent": "file",
        "session": "s1",
        "turn_id": "t1",
        "agent": "default",
        "focus": 7,
        "history": [_session()["messages"][0]],
        "retrieve_hits": 1,
        "retrieved": [hit],
        "retrieval_available": True,
        "memory_verdict": "answers",
        "reasoning": "why",
        "model": "m",
        "usage": {"input_tokens": 3, "output_tokens": 1},
        "decision_body": None,
        "decision_issue": None,
        "pending_title": None,
        "pending_body": None,
        "pending_kind": None,
        "filed_issue_number": 12,
        "filed_issue_url": "u",
        "filed_task_started": True,
        "notes": ["a note"],
    }


def _frames() -> list[dict[str, Any]]:
    """One frame of each type, with every key its JSON can hold."""
    status = {
        "type": "status",
        "text": "retrieve 1/2",
        "session": "s1",
        "turn_id": "t1",
        "message": "m1",
        "reason": "dense_unavailable",
        "detail": "ReadTimeout: timed out",
        "round": 1,
        "rounds": 2,
        "query": "message",
        "hits": 3,
        "context": 1,
    }
    response = _response()  # its message's meta: the keys the TUI reads (it drops the rest)
    meta = response["history"][0]["meta"]
    response["history"][0]["meta"] = {k: v for k, v in meta.items() if k in COPY.keys[TurnMeta]}
    return [
        status,
        {"type": "thinking", "text": "hm", "draft": 1},
        {"type": "delta", "text": "Do", "draft": 2, "replace": True},
        {"type": "done", "response": response},
        {"type": "error", "error": "boom", "reason": "stopped"},
    ]


def test_the_tui_reads_every_frame_as_sent() -> None:
    """Each frame as the service encodes it (numbered) decodes, once, into its Struct with
    every key, and a `done` frame's response shows as the reply."""
    for number, sent in enumerate(_frames(), start=1):
        frame = msgspec.convert(sent, chat.Frame)
        raw = chat.encode_frame(number, frame).decode()
        read = turn_frames.decode(raw, number)
        assert read is not None and read.id == number and read.type == sent["type"]
        assert not isinstance(read.frame, turn_frames.Unreadable)
        assert msgspec.json.encode(read.frame) == chat.encode(frame)
        assert read.terminal == (sent["type"] in chat.TERMINAL_FRAME_TYPES)
    done = turn_frames.decode(json.dumps(_frames()[3]), None)
    assert done is not None and isinstance(done.frame, sessions_wire.DoneFrame)
    shown = FinishedReply.of(done.frame.response)
    assert (shown.hit_count, shown.hits[0].issue, shown.notes) == (1, 3, ["a note"])


def test_a_newer_services_frames_do_not_break_the_tui() -> None:
    """Keys added to a frame are read past; a frame type added is skipped; a frame of a
    known type in a shape this TUI cannot read is said, not raised."""
    for sent in _frames():
        newer = with_extras(sent)
        read = turn_frames.decode(json.dumps(newer), 7)
        assert read is not None and not isinstance(read.frame, turn_frames.Unreadable), sent
    newer = with_extras(_frames()[3])
    newer["response"]["usage"]["cached_tokens"] = 1  # a new key of a TypedDict
    newer["response"]["retrieved"][0]["round"] = "rerank"  # a round this TUI's service lacks
    read = turn_frames.decode(json.dumps(newer), 7)
    assert read is not None and isinstance(read.frame, sessions_wire.DoneFrame)
    assert read.frame.response.retrieved[0].round == "rerank"
    assert turn_frames.decode('{"type": "plan", "steps": ["read", "reply"]}', 8) is None
    wrong = turn_frames.decode('{"type": "delta", "text": 7, "draft": 1}', 9)
    assert wrong is not None and wrong.frame == turn_frames.Unreadable(
        "delta", "Expected `str`, got `int` - at `$.text`"
    )
    assert not wrong.terminal and wrong.id == 9
    broken_done = turn_frames.decode('{"type": "done", "response": {"reply": "x"}}', 10)
    assert broken_done is not None and broken_done.terminal
    assert "`done` frame this TUI cannot read: Object missing required field" in (
        broken_done.frame.text if isinstance(broken_done.frame, turn_frames.Unreadable) else ""
    )
    for data, error in (("{oops", "not JSON"), ("[1]", "not a JSON object"), ("{}", "no `type`")):
        with pytest.raises(SseError, match=error):
            turn_frames.decode(data, 11)


def test_the_tui_reads_the_answers_to_stop_publish_and_file_and_a_newer_services_too() -> None:
    answers = [
        chat.StopResult(stopped=False),
        chat.StopResult(stopped=True, session="s1", turn_id="t1"),
        chat.StopResult(stopped=False, session=None, turn_id="t1", reason="finishing"),
        actions.Published(published=True, issue=7, comment_id=3, comment_url="u"),
        actions.Filed(filed_issue_number=12, filed_issue_url="u", filed_task_started=True),
    ]
    for answer in answers:
        copy = getattr(sessions_wire, type(answer).__name__)
        sent = chat.encode(answer)
        assert msgspec.json.encode(msgspec.json.decode(sent, type=copy)) == sent
        newer = json.dumps(with_extras(json.loads(sent)))
        assert msgspec.json.decode(newer, type=copy) == msgspec.json.decode(sent, type=copy)
