"""The TUI's copy of the events stream's frames (tui_client/events_wire.py) is generated from
bot/contracts/events.py (by bot/contracts/wire_copies.py, as the other copies are), holds the
same fields and tags as the service's Structs, reads every frame the service sends, and
still reads the frames of a newer service that sends more."""

from __future__ import annotations

import typing

import msgspec
import pytest

from bot.contracts import events
from bot.contracts.events_wire import COPY
from tests.fakes.wire_shapes import differences, with_extras
from tui_client import events_wire


def test_the_tui_frames_are_generated_from_the_structs() -> None:
    assert COPY.tui_file.read_text() == COPY.render_python(), (
        "run `make wire`: tui_client/events_wire.py differs from bot/contracts/events.py"
    )


def test_each_tui_class_has_the_services_fields_keys_tags_and_order() -> None:
    names = {kind.__name__ for kind in COPY.wire_types()}
    assert {kind.__name__ for kind in events.EVENT_FRAMES} | {"LedgerCounts"} <= names
    for server in COPY.wire_types():
        client = getattr(events_wire, server.__name__)
        assert differences(client, server) == [], server.__name__


def test_the_tui_frame_union_is_the_services() -> None:
    """Same members, same order, same tags: one decoder reads any frame the service sends."""
    theirs = [(k.__name__, k.__struct_config__.tag) for k in typing.get_args(events.EventFrame)]
    mine = [(k.__name__, k.__struct_config__.tag) for k in typing.get_args(events_wire.EventFrame)]
    assert mine == theirs


def test_a_frame_type_the_service_renames_is_a_difference() -> None:
    fields = [
        (f.name, f.type) if f.required else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(events.ResyncFrame)
    ]
    renamed = msgspec.defstruct("ResyncFrame", fields, tag_field="type", tag="reload", kw_only=True)
    assert differences(events_wire.ResyncFrame, renamed) == [
        "TUI tag ('type', 'resync') != service tag ('type', 'reload')"
    ]


def _sent() -> list[events.EventFrame]:
    """One frame of each type, every optional object present."""
    return [
        events.TaskFrame(
            id=4,
            task_id=1,
            repo="o/r",
            issue=2,
            title="Blue",
            state="delivered",
            pr_url="https://github.com/o/r/pull/3",
            cost_usd=0.5,
            tokens=10,
            reason="done",
            updated_at="2026-01-01T00:00:00+00:00",
            pr_state="open",
            review=events.LedgerCounts(
                open=0, addressed=1, declined=0, needs_operator=0, summary="1 addressed"
            ),
            ready_for_review=True,
            question=None,
        ),
        events.ResultFrame(
            session_id="s", task_id=1, kind=events.ResultKind.QUESTION, text="?", message_id="m"
        ),
        events.SessionFrame(session_id="s", change=events.SessionChange.SUMMARISED),
        events.ReviewFrame(
            task_id=1, repo="o/r", issue=2, pr_number=None, pr_url=None, threads=["review:5"], at=""
        ),
        events.FixRunFrame(task_id=1, pr_number=3, head_sha="abc", checks=["lint"], run=1, of=2),
        events.LedgerFrame(
            task_id=1,
            repo="o/r",
            issue=2,
            title="Blue",
            state="delivered",
            pr_url=None,
            pr_state="open",
            review=events.LedgerCounts(
                open=1, addressed=0, declined=0, needs_operator=0, summary="1 open"
            ),
            ready_for_review=False,
        ),
        events.ResyncFrame(reason=events.MISSED_REASON),
    ]


def test_the_tui_decodes_each_frame_the_service_sends_as_sent() -> None:
    sent = _sent()
    assert len(sent) == len(events.EVENT_FRAMES)
    for frame in sent:
        wire = msgspec.json.encode(frame)
        read = msgspec.json.decode(wire, type=events_wire.EventFrame)
        assert type(read).__name__ == type(frame).__name__
        assert msgspec.json.encode(read) == wire  # every key, in the order it was sent


@pytest.mark.parametrize("frame", _sent(), ids=lambda frame: type(frame).__name__)
def test_a_newer_services_frame_with_more_keys_is_still_read(frame: events.EventFrame) -> None:
    newer = msgspec.json.encode(with_extras(msgspec.to_builtins(frame)))
    read = msgspec.json.decode(newer, type=events_wire.EventFrame)
    assert msgspec.json.encode(read) == msgspec.json.encode(frame)
