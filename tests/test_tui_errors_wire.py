"""The TUI's copy of an error answer's detail (tui_client/errors_wire.py) is generated from
bot/contracts/errors.py, holds the same fields as the service's Struct, reads every key the
service sends as sent (a null stays a null, an absent key stays absent), and still reads the
detail of a newer service that sends more."""

from __future__ import annotations

import msgspec

from bot.contracts import errors
from bot.contracts.errors_wire import COPY
from bot.errors import error_body
from tests.fakes.wire_shapes import differences
from tui_client import errors_wire
from tui_client.api import _api_error


def test_the_tui_error_detail_is_generated_from_the_struct() -> None:
    assert COPY.tui_file.read_text() == COPY.render_python(), (
        "run `make wire`: tui_client/errors_wire.py differs from bot/contracts/errors.py"
    )


def test_the_tui_class_has_the_services_fields_keys_and_order() -> None:
    assert [kind.__name__ for kind in COPY.wire_types()] == ["ErrorDetail"]
    assert differences(errors_wire.ErrorDetail, errors.ErrorDetail) == []


def test_the_comparison_fails_on_a_renamed_field() -> None:
    fields = [(f.name, f.type, f.default) for f in msgspec.structs.fields(errors.ErrorDetail)]
    renamed = msgspec.defstruct("ErrorDetail", [("name", str, msgspec.UNSET), *fields[1:]])
    assert differences(errors_wire.ErrorDetail, renamed) == [
        "TUI ('field', 'field', False) != service ('name', 'name', False)"
    ]


EVERY = errors.ErrorDetail(
    field="issue",
    known=["default"],
    repo="o/r",
    reason="ValueError",
    limit=65536,
    session=None,
    turn_id="t",
    task=3,
    state="queued",
    wanted="running",
    allowed=["running"],
    request_id="r",
    retry_after=5,
    header="Authorization",
    origin="https://elsewhere",
    setting="STEELFRAME_METRICS_TOKEN",
    missing=["repository"],
    delivery="d",
    base_url="https://api.github.com",
    github_status=None,
    github_request_id="g",
)


def test_the_tui_reads_every_key_as_sent() -> None:
    unset = [
        f.name for f in msgspec.structs.fields(EVERY) if getattr(EVERY, f.name) is msgspec.UNSET
    ]
    assert unset == [], "give EVERY a value for each key"
    sent = msgspec.json.encode(EVERY)
    read = msgspec.json.decode(sent, type=errors_wire.ErrorDetail)
    assert msgspec.json.encode(read) == sent
    few = msgspec.json.encode(errors.ErrorDetail(session=None, turn_id="t"))
    assert few == b'{"session":null,"turn_id":"t"}'
    assert msgspec.json.encode(msgspec.json.decode(few, type=errors_wire.ErrorDetail)) == few


def test_a_newer_services_keys_do_not_break_the_tui() -> None:
    body = error_body("busy", errors.ErrorDetail(retry_after=5), code="busy")
    body["detail"]["added_later"] = {"x": 1}
    answer = _api_error(503, "Service Unavailable", msgspec.json.encode(body))
    assert answer.detail == errors_wire.ErrorDetail(retry_after=5)
    try:
        msgspec.convert(body["detail"], errors.ErrorDetail)
    except msgspec.ValidationError:
        pass  # the service's own Struct refuses unknown keys: the TUI's must not
    else:
        raise AssertionError("the service's Struct accepted unknown keys")
