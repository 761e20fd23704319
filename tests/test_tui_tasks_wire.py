"""The TUI's copy of the task JSON (tui_client/tasks_wire.py) is generated from
bot/contracts/tasks.py, holds the same fields as the service's Structs, reads every key the
service sends, and still reads the answers of a newer service that sends more."""

from __future__ import annotations

import json
import typing
from typing import Any

import msgspec

from bot.contracts import tasks
from bot.contracts.tasks_wire import COPY
from tests.fakes.tui import THREAD, task_detail
from tests.fakes.wire_shapes import differences, with_extras
from tui_client import tasks_wire


def test_the_tui_task_json_is_generated_from_the_structs() -> None:
    assert COPY.tui_file.read_text() == COPY.render_python(), (
        "run `make wire`: tui_client/tasks_wire.py differs from bot/contracts/tasks.py"
    )


def test_each_tui_class_has_the_services_fields_keys_and_order() -> None:
    for server in COPY.wire_types():
        client = getattr(tasks_wire, server.__name__)
        assert differences(client, server) == [], server.__name__


def test_the_comparison_fails_on_a_renamed_or_dropped_field() -> None:
    """What the test above would say if the service renamed or dropped a field."""
    fields = [(f.name, f.type) for f in msgspec.structs.fields(tasks.Lease)]
    renamed = msgspec.defstruct("Lease", [("owner", str), *fields[1:]])
    dropped = msgspec.defstruct("Lease", fields[:-1])
    assert differences(tasks_wire.Lease, renamed) == [
        "TUI ('holder', 'holder', True) != service ('owner', 'owner', True)"
    ]
    assert differences(tasks_wire.Lease, dropped) == [
        "only one side has ('expires_at', 'expires_at', True)"
    ]


def _full_detail() -> dict[str, Any]:
    """A task's detail with every object the JSON can hold present (not null or empty)."""
    ci = {
        "head_sha": "abc",
        "pr_number": 5,
        "checks": ["tests"],
        "run": 1,
        "of": 2,
        "verdict": "code",
        "outcome": "pushed",
        "result_sha": "def",
        "reason": "",
        "at": "t",
        "updated_at": "t",
    }
    event = {
        "id": 3,
        "kind": "transition",
        "from": "queued",
        "to": "running",
        "actor": "worker",
        "at": "t",
        "detail": None,
        "data": {"pr_number": 5, "budget": {"tokens": 9, "usd": None, "source": "settings"}},
    }
    detail = task_detail(
        last_event={"kind": "transition", "at": "t", "detail": "d"},
        pr_state="draft",
        blocked=[
            {"attempt": 1, "host": "h", "port": 443, "count": 2, "reason": "r", "first_at": "t"}
        ],
        lease={"holder": "w", "heartbeat_at": "t", "expires_at": "t"},
        events=[event],
        review_threads=[THREAD],
        plan={
            "status": "proposed",
            "text": "x",
            "brief": None,
            "edited": False,
            "proposed_at": "t",
            "decided_at": None,
        },
        estimate={
            "runs": 2,
            "tokens": 9,
            "tokens_p90": 12,
            "usd": None,
            "usd_p90": None,
            "text": "Estimate",
            "similar": 2,
            "typical_error": 0.25,
        },
        offered=[
            {"issue": 1, "task_id": 2, "at": "t", "question": "q", "decision": "d", "score": 0.5}
        ],
        ci=[ci],
    )
    return typing.cast(dict[str, Any], msgspec.to_builtins(detail))


def test_the_tui_reads_every_key_the_service_sends_as_sent() -> None:
    sent = msgspec.json.encode(msgspec.convert(_full_detail(), tasks.TaskDetail))
    read = msgspec.json.decode(sent, type=tasks_wire.TaskDetail)
    assert msgspec.json.encode(read) == sent  # every key, in the order it was sent
    assert read.events[0].from_ == "queued" and read.events[0].data == {
        "pr_number": 5,
        "budget": {"tokens": 9, "usd": None, "source": "settings"},
    }
    detail = _full_detail()
    card = {f.encode_name: detail[f.encode_name] for f in msgspec.structs.fields(tasks.BoardTask)}
    board = tasks.Board(
        tasks=[msgspec.convert(card, tasks.BoardTask)],
        coding_sandbox=tasks.CodingSandbox(mode="off", network="off", warning="unisolated"),
    )
    sent = msgspec.json.encode(board)
    assert msgspec.json.encode(msgspec.json.decode(sent, type=tasks_wire.Board)) == sent
    log = tasks.TaskLog(
        task=1, runs=[tasks.RunLog(generation=1, attempt=1, status="ok", at="t", text="")]
    )
    sent = msgspec.json.encode(log)
    assert msgspec.json.encode(msgspec.json.decode(sent, type=tasks_wire.TaskLog)) == sent


def test_a_newer_services_keys_and_words_do_not_break_the_tui() -> None:
    newer = with_extras(_full_detail())
    newer["pr_state"] = "queued_for_merge"  # a word this TUI's service did not have
    raw = json.dumps(newer).encode()
    read = msgspec.json.decode(raw, type=tasks_wire.TaskDetail)
    assert read.pr_state == "queued_for_merge" and read.lease is not None
    assert read.lease.holder == "w"
    try:
        msgspec.json.decode(raw, type=tasks.TaskDetail)
    except msgspec.ValidationError:
        pass  # the service's own Structs refuse unknown keys: the TUI's must not
    else:
        raise AssertionError("the service's Structs accepted unknown keys")
