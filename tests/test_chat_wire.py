"""Chat's wire is declared once (bot/contracts/chat.py): the clients' constants files and the
OpenAPI components are made from it, and the bytes a turn streams are the ones the clients
have always read."""

from __future__ import annotations

import json
from enum import StrEnum

import msgspec
import pytest

from bot.chat.frames import NumberedFrame
from bot.contracts import chat
from bot.contracts.chat_wire import GUI_FILE, TUI_FILE, rendered
from operator_api.schemas import component_schemas
from tui_client import wire


def test_the_gui_and_tui_constants_are_generated_from_the_structs() -> None:
    stale = [path.name for path, text in rendered().items() if path.read_text() != text]
    assert stale == [], f"run `make wire`: {stale} differ from bot/contracts/chat.py"
    assert {GUI_FILE.name, TUI_FILE.name} == {"wire.js", "wire.py"}


def test_the_tui_reads_the_frame_names_the_service_sends() -> None:
    sent = {kind.__struct_config__.tag for kind in chat.FRAME_TYPES}
    assert {wire.STATUS, wire.THINKING, wire.DELTA, wire.DONE, wire.ERROR} == sent
    assert wire.TERMINAL_FRAMES == chat.TERMINAL_FRAME_TYPES


def test_the_clients_read_the_status_reasons_the_service_sends() -> None:
    """Each word a `status` frame's `reason` may be, under the same name in both clients
    (the TUI's `StatusReason`, the GUI's `STATUS_REASON`), and only those on the wire."""
    sent = _same_in_both_clients(chat.StatusReason, wire.StatusReason, "STATUS_REASON")
    assert {"FRAMES_LOST", "RETRIEVE_UNAVAILABLE", "DENSE_UNAVAILABLE"} <= sent.keys()
    lost = NumberedFrame.of(3, chat.StatusFrame(text="lost", reason=chat.StatusReason.FRAMES_LOST))
    assert lost.data == b'{"id":3,"type":"status","text":"lost","reason":"frames_lost"}'
    assert NumberedFrame.decode(lost.data) == lost
    unknown = b'{"id":3,"type":"status","text":"lost","reason":"ValueError: no"}'
    with pytest.raises(msgspec.ValidationError):
        NumberedFrame.decode(unknown)


def test_the_clients_read_the_error_reasons_the_service_sends() -> None:
    """Each word an `error` frame's `reason` may be, under the same name in both clients
    (the TUI's `ErrorReason`, the GUI's `ERROR_REASON`), and only those on the wire: what
    each producer sends is checked in tests/test_error_reasons.py."""
    sent = _same_in_both_clients(chat.ErrorReason, wire.ErrorReason, "ERROR_REASON")
    assert sent == {
        "STOPPED": "stopped",
        "CANCELLED": "cancelled",
        "RUNTIME": "runtime",
        "TIMEOUT": "timeout",
        "SESSION_DELETED": "session_deleted",
        "INTERNAL": "internal",
    }
    schemas = component_schemas()  # what the OpenAPI document says the stream may carry
    assert schemas["ErrorReason"]["enum"] == sorted(sent.values())
    reason = schemas["ErrorFrame"]["properties"]["reason"]["anyOf"]
    assert {"$ref": "#/components/schemas/ErrorReason"} in reason
    unknown = b'{"id":9,"type":"error","error":"the turn failed","reason":"exploded"}'
    with pytest.raises(msgspec.ValidationError):
        NumberedFrame.decode(unknown)


def _same_in_both_clients(sent: type[StrEnum], tui: type[StrEnum], gui_name: str) -> dict[str, str]:
    words = {reason.name: reason.value for reason in sent}
    assert {reason.name: reason.value for reason in tui} == words
    listed = ", ".join(f"{name}: {json.dumps(word)}" for name, word in words.items())
    assert f"export const {gui_name} = Object.freeze({{ {listed} }});" in GUI_FILE.read_text()
    return words


def test_a_numbered_frame_is_the_json_the_stream_always_carried() -> None:
    """`id` first, then `type`, then the frame's keys in order; defaults left out."""
    first = NumberedFrame.of(
        7, chat.StatusFrame(text="turn started", session="s1", turn_id="t1", message="hi")
    )
    assert first.data == (
        b'{"id":7,"type":"status","text":"turn started","session":"s1","turn_id":"t1",'
        b'"message":"hi"}'
    )
    delta = NumberedFrame.of(8, chat.DeltaFrame(text="", draft=2, replace=True))
    assert delta.data == b'{"id":8,"type":"delta","text":"","draft":2,"replace":true}'
    assert NumberedFrame.of(9, chat.DeltaFrame(text="a", draft=1)).data == (
        b'{"id":9,"type":"delta","text":"a","draft":1}'
    )
    ended = NumberedFrame.of(
        10, chat.ErrorFrame(error="turn stopped", reason=chat.ErrorReason.STOPPED)
    )
    assert json.loads(ended.data) == {
        "id": 10,
        "type": "error",
        "error": "turn stopped",
        "reason": "stopped",
    }
    assert NumberedFrame.decode(ended.data) == ended and ended.terminal


def test_the_openapi_chat_components_are_the_structs_schemas() -> None:
    components = component_schemas()
    kinds = [ref["$ref"].rsplit("/", 1)[1] for ref in components["Frame"]["anyOf"]]
    assert kinds == [kind.__name__ for kind in chat.FRAME_TYPES]
    delta = components["DeltaFrame"]
    assert delta["required"] == ["id", "type", "text", "draft"]
    assert delta["additionalProperties"] is False
    response = components["ChatResponse"]
    assert response["required"] == [f.name for f in msgspec.structs.fields(chat.ChatResponse)]
    assert response["additionalProperties"] is False
