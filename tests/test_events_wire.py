"""The TUI's copy of the events stream's frames (tui_client/events_wire.py) is generated from
bot/contracts/events.py and reads every frame the service sends."""

from __future__ import annotations

import msgspec

from bot.contracts import events
from bot.contracts.events_wire import TUI_FILE, render_python
from tui_client import events_wire


def test_the_tui_frames_are_generated_from_the_structs() -> None:
    assert TUI_FILE.read_text() == render_python(), (
        "run `make wire`: tui_client/events_wire.py differs from bot/contracts/events.py"
    )


def test_the_tui_decodes_each_frame_the_service_sends_as_sent() -> None:
    sent: list[events.EventFrame] = [
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
    assert len(sent) == len(events.EVENT_FRAMES)
    for frame in sent:
        wire = msgspec.json.encode(frame)
        read = msgspec.json.decode(wire, type=events_wire.EventFrame)
        assert type(read).__name__ == type(frame).__name__
        assert msgspec.json.encode(read) == wire  # every key, in the order it was sent
