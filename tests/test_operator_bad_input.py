"""Bad input on the operator API: deep or huge JSON, empty references, oversized header
lines, a chat command naming no possible issue and an Idempotency-Key that is not UTF-8 are
clear 4xx answers that change nothing and log one line, never a 500."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ApiClient, make_settings
from tests.raw_http import request_bytes, send_raw

# Every operator endpoint that reads a JSON body.
BODY_ENDPOINTS = [
    "/api/operator/chat",
    "/api/operator/chat/stream",
    "/api/operator/chat/clear",
    "/api/operator/chat/new",
    "/api/operator/chat/decision",
    "/api/operator/chat/file",
    "/api/operator/tasks/1/terminate",
    "/api/operator/tasks/1/archive",
]


def _nested(depth: int) -> bytes:
    return b'{"message": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("path", BODY_ENDPOINTS)
@pytest.mark.parametrize("depth", [40, 900, 5_000])
async def test_deeply_nested_json_is_a_400_on_every_endpoint(
    api: ApiClient, path: str, depth: int
) -> None:
    body = _nested(depth)
    response = await api.post(path, data=body, headers={"Content-Type": "application/json"})
    # Bodies over an endpoint's own cap are a 413 before parsing; the rest are refused as deep.
    assert response.status in (400, 413), await response.text()
    error = await response.json()
    assert error["error"] and error["code"] in ("bad_request", "payload_too_large")
    if response.status == 400:
        assert "nested deeper" in error["error"]
    history = await (await api.get("/api/operator/chat")).json()
    assert history["messages"] == []


async def test_a_body_within_the_depth_limit_is_still_read(api: ApiClient) -> None:
    response = await api.post("/api/operator/chat/new", data=b'{"title": "ok"}')
    assert response.status == 201


@pytest.mark.parametrize("path", ["/api/operator/chat", "/api/operator/chat/new"])
async def test_an_empty_agent_name_is_a_400_not_a_foreign_key_violation(
    api: ApiClient, path: str
) -> None:
    response = await api.post(
        path, json={"message": "hi", "agent": ""} if "new" not in path else {"agent": ""}
    )
    assert response.status == 400
    error = await response.json()
    assert error["detail"]["field"] == "agent"
    assert "unknown agent" in error["error"]
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []


@pytest.mark.parametrize(
    "body",
    [b"NaN", b'{"message": NaN}', b'{"message": 1e999}', b'{"message": "\\ud800"}', b"\xff"],
)
async def test_json_the_database_cannot_store_is_a_400(api: ApiClient, body: bytes) -> None:
    response = await api.post("/api/operator/chat", data=body)
    assert response.status == 400
    assert (await response.json())["code"] == "bad_request"


async def test_a_header_line_over_8_kb_is_refused_with_one_quiet_log_line(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    server = api.raw.server
    with caplog.at_level(logging.INFO):
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(
            b"GET /api/operator/chat HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9_000 + b"\r\n\r\n"
        )
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout=30)
        writer.close()
    assert status_line.split()[1] in (b"400", b"431")
    refused = [r for r in caplog.records if "malformed request" in r.getMessage()]
    assert len(refused) == 1
    assert refused[0].levelno == logging.WARNING
    assert not any(r.exc_info for r in caplog.records), "a traceback was logged"
    assert not any("aaaa" in r.getMessage() for r in caplog.records), "the header was logged"


async def test_a_database_that_goes_away_is_a_503_with_a_reason_not_a_500(
    api: ApiClient, tmp_path: Path
) -> None:
    database = Path(api.services.db.engine.url.database or "")

    def take_it_away() -> None:
        api.services.db.dispose()  # no pooled connection keeps the old file open
        database.rename(tmp_path / "moved-away.db")
        database.mkdir()  # where the file was, nothing SQLite can open

    await asyncio.to_thread(take_it_away)
    response = await api.get("/api/operator/board")
    assert response.status == 503
    assert response.headers["Retry-After"] == "5"
    error = await response.json()
    assert error["code"] == "database_unavailable" and error["error"]


async def _nothing_stored(api: ApiClient) -> None:
    sessions = await (await api.get("/api/operator/chat/sessions")).json()
    assert sessions["sessions"] == []


@pytest.mark.parametrize(
    "message",
    [
        "discuss #99999999999999999999",  # SQLite: OverflowError mid-turn
        "discuss #2147483648",  # PostgreSQL: past the 32-bit issue column
        "discuss #" + "9" * 5_000,  # past int()'s digit limit
        "discuss #0",  # as "focus": 0 is
        "discuss #000",  # zeros only: still no issue
        "forget #0",
        "what is #2147483648 waiting for?",
        "what is still open on #0?",
    ],
)
async def test_a_command_naming_no_possible_issue_is_a_400_that_claims_nothing(
    api_factory: Any, tmp_path: Path, any_db_url: str, message: str
) -> None:
    api = await api_factory(make_settings(tmp_path, database_url=any_db_url))
    response = await api.post(
        "/api/operator/chat", json={"message": message}, headers={"Idempotency-Key": "k1"}
    )
    assert response.status == 400, await response.text()
    error = await response.json()
    assert error["detail"]["field"] == "message"
    assert "not an issue number" in error["error"] and len(error["error"]) < 200
    await _nothing_stored(api)
    # The key was not claimed: a message sent with it now runs its turn.
    again = await api.post(
        "/api/operator/chat",
        json={"message": "discuss #2147483647"},
        headers={"Idempotency-Key": "k1"},
    )
    assert again.status == 200, await again.text()


async def test_a_command_number_with_leading_zeros_names_the_issue_github_reads(
    api_factory: Any, tmp_path: Path, pg_url: str
) -> None:
    # GitHub reads `#007` as #7 (it links it, and "Fixes #007" closes #7; so does
    # memory.analysis.closing_references): a command takes it the same way, and says #7.
    api = await api_factory(make_settings(tmp_path, database_url=pg_url))
    response = await api.post("/api/operator/chat", json={"message": "discuss #007"})
    assert response.status == 200, await response.text()
    turn = await response.json()
    assert turn["focus"] == 7 and "Discussing #7 in this session" in turn["reply"]
    asked = await api.post("/api/operator/chat", json={"message": "what is #0007 waiting for?"})
    assert "#7 has no task" in (await asked.json())["reply"]


async def test_a_command_with_another_scripts_digits_is_plain_chat(api: ApiClient) -> None:
    response = await api.post(
        "/api/operator/chat", json={"message": "discuss #\u0663"}
    )  # Arabic-Indic 3
    assert response.status == 200, await response.text()
    sessions = (await (await api.get("/api/operator/chat/sessions")).json())["sessions"]
    assert [session["focus"] for session in sessions] == [None]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/operator/chat", b'{"message": "hi"}'),
        ("/api/operator/chat/stream", b'{"message": "hi"}'),
        ("/api/operator/chat/decision", b'{"issue": 3, "body": "Do it."}'),
    ],
)
async def test_an_idempotency_key_that_is_not_utf8_is_a_400(
    api: ApiClient, path: str, body: bytes
) -> None:
    headers = {
        "Authorization": f"Bearer {api.token}".encode(),
        "Content-Type": b"application/json",
        "Idempotency-Key": b"k\xff",
    }
    answer = await send_raw(api.raw.server, request_bytes("POST", path, headers, body))
    assert answer.status == 400, answer.body
    error = answer.json()
    assert error["detail"]["field"] == "Idempotency-Key"
    assert "UTF-8" in error["error"]
    await _nothing_stored(api)
