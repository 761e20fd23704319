"""The TUI's copy of the chat's JSON (tui_client/sessions_wire.py: the sessions, a turn's
`done` response, the keys of a message's `meta` it shows) is generated from
bot/contracts/chat.py, holds the same fields as the service's Structs, reads every key the
service sends, and still reads the answers of a newer service that sends more."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import msgspec
import pytest

from bot.contracts import chat, wire_copies
from bot.contracts.chat_sessions_wire import COPY, TUI_FILE, render_python, wire_types
from bot.contracts.turn_meta import TurnMeta
from tests.fakes.wire_shapes import differences
from tui_client import sessions_wire
from tui_client.chat_turn import done_response
from tui_client.reply import FinishedReply


def test_the_tui_sessions_json_is_generated_from_the_structs() -> None:
    assert TUI_FILE.read_text() == render_python(), (
        "run `make wire`: tui_client/sessions_wire.py differs from bot/contracts/chat.py"
    )


def test_each_tui_class_has_the_services_fields_keys_and_order() -> None:
    names = [kind.__name__ for kind in wire_types()]
    assert {"Sessions", "ListedSession", "Session", "NewSession", "Message"} <= set(names)
    assert {"ChatResponse", "RetrievedHit", "TurnMeta"} <= set(names)
    for server in wire_types():
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


def _with_extras(value: Any) -> Any:
    """The JSON with a key no one knows yet added to every object (a newer service's)."""
    if isinstance(value, dict):
        return {**{k: _with_extras(v) for k, v in value.items()}, "added_later": {"x": 1}}
    if isinstance(value, list):
        return [_with_extras(item) for item in value]
    return value


def test_a_newer_services_keys_and_words_do_not_break_the_tui() -> None:
    newer = _with_extras(_session())
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


def test_the_tui_reads_a_done_response_as_sent_and_a_newer_services_too() -> None:
    response = chat.encode(msgspec.convert(_response(), chat.ChatResponse))
    read = done_response({"type": "done", "response": json.loads(response)})
    assert read.retrieved[0].round == "message" and read.filed_issue_number == 12
    shown = FinishedReply.of(read)
    assert (shown.hit_count, shown.hits[0].issue, shown.notes) == (1, 3, ["a note"])
    newer = _with_extras(_response())
    newer["usage"] = {"input_tokens": 3, "output_tokens": 1, "cached_tokens": 1}  # a new key
    newer["retrieved"][0]["round"] = "rerank"  # a round this TUI's service did not have
    read = done_response({"type": "done", "response": newer})
    assert read.retrieved[0].round == "rerank" and read.reply == "Done."
