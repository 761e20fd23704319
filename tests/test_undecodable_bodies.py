"""A body that is not what its Content-Encoding says (gzip, deflate) is a 400 with a message
on every route that reads one, the unauthenticated webhook endpoint included: one WARNING
line, no traceback, nothing stored."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.config_values import Secret
from tests.conftest import WEBHOOK_SECRET, ApiClient, make_settings, webhook_headers
from tests.raw_http import RawAnswer, request_bytes, send_raw
from webhooks.deliveries import WebhookDelivery

CHAT_BODY = b'{"message": "hi"}'
PING_BODY = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'


@pytest.fixture
async def api(api_factory: Callable[..., Any], tmp_path: Path) -> ApiClient:
    return await api_factory(make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET)))


def chunked(body: bytes) -> bytes:
    """`body` as one chunk of a chunked body: aiohttp, not the webhook fast lane, reads it."""
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


async def send(api: ApiClient, path: str, headers: dict[str, str], body: bytes) -> RawAnswer:
    encoded = {name: value.encode() for name, value in headers.items()}
    return await send_raw(api.raw.server, request_bytes("POST", path, encoded, body))


def assert_refused_quietly(answer: RawAnswer, caplog: pytest.LogCaptureFixture) -> None:
    assert answer.status == 400, answer.body
    error = answer.json()
    assert error["code"] == "bad_request"
    assert error["error"] == "the request body could not be decoded"
    lines = [r for r in caplog.records if "not decodable" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("framing", ["length", "chunked"])
async def test_an_operator_body_not_in_its_content_encoding_is_a_400(
    api: ApiClient, caplog: pytest.LogCaptureFixture, encoding: str, framing: str
) -> None:
    headers = {
        "Authorization": f"Bearer {api.token}",
        "Content-Type": "application/json",
        "Content-Encoding": encoding,
    }
    body = CHAT_BODY
    if framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
        body = chunked(body)
    with caplog.at_level(logging.INFO):
        answer = await send(api, "/api/operator/chat", headers, body)
    assert_refused_quietly(answer, caplog)
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_webhook_body_not_in_its_content_encoding_is_a_400(
    api: ApiClient, caplog: pytest.LogCaptureFixture, encoding: str
) -> None:
    headers = {
        **webhook_headers(PING_BODY, "ping"),
        "Content-Encoding": encoding,
        "Transfer-Encoding": "chunked",
    }
    with caplog.at_level(logging.INFO):
        answer = await send(api, "/api/github/webhooks", headers, chunked(PING_BODY))
    assert_refused_quietly(answer, caplog)
    stored = api.services.db.call(
        lambda s: s.scalar(select(func.count(WebhookDelivery.delivery_id)))
    )
    assert stored == 0
