"""webhooks.fields: what intake reads of a payload without parsing it in full must be what
the full parse (orjson + routing.lookup) reads, or nothing (the receiver then parses in
full). Checked on every real GitHub example and on payloads bent out of shape."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from gidgethub.sansio import Event

from tests.conftest import GITHUB_DATA
from webhooks.fields import ALWAYS, FieldReader
from webhooks.router import build_router
from webhooks.routing import lookup, missing_needs, needs_for

EXAMPLES = sorted((GITHUB_DATA / "webhook-examples").rglob("*.json"))
ROUTER = build_router()


def full_read(event: str, body: bytes) -> tuple[dict[str, Any], list[str]] | None:
    """What the receiver reads by parsing in full: None where orjson refuses the body."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    paths = {*ALWAYS, *(path for path, _ in needs_for(ROUTER, event, data.get("action")))}
    values = {path: lookup(data, path) for path in paths}
    return values, missing_needs(ROUTER, Event(data, event=event, delivery_id="-"))


def agrees(reader: FieldReader, event: str, body: bytes) -> bool:
    """The reader's answer, when it gives one, is the full parse's."""
    read = reader.read(event, body)
    if read is None:
        return True
    fields, missing = read
    full = full_read(event, body)
    assert full is not None, body[:200]
    values, full_missing = full
    assert {path: fields.get(path) for path in values} == values
    assert missing == full_missing
    return False


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_real_example_reads_as_the_full_parse(path: Path) -> None:
    reader = FieldReader(ROUTER)
    body = path.read_bytes()
    assert not agrees(reader, path.parent.name, body), "the example took the full parse"
    # Read again once the event's shape has grown (the first read may have decoded twice).
    assert not agrees(reader, path.parent.name, body)


def issue(**changes: Any) -> dict[str, Any]:
    data = json.loads((GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_text())
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "read"),
    [
        (issue(issue=None), True),  # null where an object was: lacks issue.number
        (issue(installation={"id": True}), True),  # a bool is no installation id
        (issue(installation={"id": 2**63}), True),  # out of the column's range: None
        (issue(repository="Codertocat/Hello-World"), False),  # neither object nor null
        (issue(issue=[1]), False),
        (issue(installation={"id": 2**64}), False),  # orjson reads a float
        (issue(action=7), False),  # routed by gidgethub's rules: full parse
        (issue(action="labeled", label={"name": 5}), True),  # a need mistyped
        (issue(action="unknown-action"), True),
    ],
)
def test_bent_payloads_read_as_the_full_parse_or_not_at_all(
    data: dict[str, Any], read: bool
) -> None:
    body = json.dumps(data).encode()
    reader = FieldReader(ROUTER)
    assert agrees(reader, "issues", body) is not read


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'"text"', b"", b'{"a": 1} x', b'{"a": NaN}', b'{"a": "\\ud800"}'],
)
def test_what_orjson_refuses_is_left_to_the_full_parse(body: bytes) -> None:
    assert FieldReader(ROUTER).read("issues", body) is None


def test_damaged_payloads_never_read_otherwise_than_the_full_parse() -> None:
    """Random byte edits of a real payload: whatever the reader answers, the full parse
    answers the same; out-of-range numbers outside the paths read are the one known
    difference (webhooks.fields), left out here."""
    original = (GITHUB_DATA / "webhook-examples/issues/opened.payload.json").read_bytes()
    alphabet = b'{}[]",:\\0123456789+-.tfnul \x01ab/'
    chooser = random.Random(17)
    reader = FieldReader(ROUTER)
    read = 0
    for _ in range(3000):
        body = bytearray(original)
        for _ in range(chooser.randint(1, 3)):
            at = chooser.randrange(len(body))
            if chooser.random() < 0.5:
                body[at] = chooser.choice(alphabet)
            else:
                body.insert(at, chooser.choice(alphabet))
        edited = bytes(body)
        if full_read("issues", edited) is None and reader.read("issues", edited) is not None:
            with pytest.raises(orjson.JSONDecodeError, match="number is infinity"):
                orjson.loads(edited)
            continue
        read += not agrees(reader, "issues", edited)
    assert read > 1000  # most edits land in text nobody reads
