"""X-Hub-Signature-256 checking, including GitHub's published test vector."""

from __future__ import annotations

import json

import pytest

from bot.errors import Unauthorized
from tests.conftest import GITHUB_DATA
from webhooks.signature import signature_for, verify_signature


def test_githubs_published_test_vector_verifies() -> None:
    vector = json.loads((GITHUB_DATA / "hmac-test-vectors.json").read_text())["vectors"][0]
    body = vector["payload"].encode()
    assert signature_for(vector["secret"], body) == vector["x_hub_signature_256"]
    verify_signature(vector["secret"], body, vector["x_hub_signature_256"])


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (None, "missing"),
        ("", "missing"),
        ("sha1=0123", "must start with sha256="),
        ("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", "must start"),
        ("sha256=" + "0" * 64, "does not match"),
        ("sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17", "does not"),
    ],
)
def test_bad_signatures_are_unauthorized(header: str | None, why: str) -> None:
    with pytest.raises(Unauthorized) as caught:
        verify_signature("It's a Secret to Everybody", b"Hello, World!", header)
    assert why in caught.value.message


def test_a_changed_body_fails_the_signature() -> None:
    good = signature_for("s", b'{"a": 1}')
    with pytest.raises(Unauthorized):
        verify_signature("s", b'{"a": 2}', good)
    with pytest.raises(Unauthorized):
        verify_signature("other secret", b'{"a": 1}', good)
