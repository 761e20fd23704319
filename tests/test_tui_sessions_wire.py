"""The TUI's copy of the chat sessions' JSON (tui_client/sessions_wire.py) is generated from
bot/contracts/chat.py, holds the same fields as the service's Structs, reads every key the
service sends, and still reads the answers of a newer service that sends more."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from bot.contracts import chat
from bot.contracts.chat_sessions_wire import TUI_FILE, render_python, wire_types
from tests.fakes.wire_shapes import differences
from tui_client import sessions_wire
from tui_client.transcript import response_from_message


def test_the_tui_sessions_json_is_generated_from_the_structs() -> None:
    assert TUI_FILE.read_text() == render_python(), (
        "run `make wire`: tui_client/sessions_wire.py differs from bot/contracts/chat.py"
    )


def test_each_tui_class_has_the_services_fields_keys_and_order() -> None:
    names = [kind.__name__ for kind in wire_types()]
    assert {"Sessions", "ListedSession", "Session", "NewSession", "Message"} <= set(names)
    for server in wire_types():
        client = getattr(sessions_wire, server.__name__)
        assert differences(client, server) == [], server.__name__


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
    sent = chat.encode(msgspec.convert(_session(), chat.Session))
    read = msgspec.json.decode(sent, type=sessions_wire.Session)
    assert msgspec.json.encode(read) == sent  # every key, in the order it was sent
    assert read.decision is not None and read.decision.issue == 7
    assert response_from_message(read.messages[0])["filed_issue_number"] == 12
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
