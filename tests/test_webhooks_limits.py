"""Bounded intake and the operator's view of deliveries: the budget of body bytes in
flight, quiet refusals of oversized headers, and /api/operator/deliveries."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.clock import utcnow
from bot.config_values import Secret
from bot.errors import PayloadTooLarge, Unauthorized
from tests.conftest import (
    WEBHOOK_SECRET,
    ApiClient,
    make_settings,
    store_deliveries,
    webhook_headers,
)
from tests.fakes.serve_process import serve
from webhooks.body import Busy, InFlight, SignedBody, reading
from webhooks.deliveries import DeliveryStatus, NewDelivery, WebhookDelivery
from webhooks.signature import signature_for

MB = 1024 * 1024


def test_a_body_is_hashed_as_it_is_read_and_released_only_when_signed() -> None:
    budget = InFlight(10 * MB)
    body = b'{"zen": "' + b"x" * 300_000 + b'"}'  # large enough for an anonymous map
    with reading(budget, "s3cret", max_body=MB, expected=len(body)) as signed:
        assert budget.used == len(body)
        for start in range(0, len(body), 65536):
            signed.feed(body[start : start + 65536])
        assert signed.verified(signature_for("s3cret", body)) == body
    assert budget.used == 0


def test_a_wrong_signature_or_an_overlong_body_is_refused_and_the_budget_freed() -> None:
    budget = InFlight(10 * MB)
    with pytest.raises(Unauthorized), reading(budget, "s3cret", max_body=MB, expected=4) as body:
        body.feed(b"abcd")
        body.verified(signature_for("other", b"abcd"))
    with pytest.raises(PayloadTooLarge), reading(budget, "s", max_body=8, expected=None) as body:
        body.feed(b"12345")
        body.feed(b"6789")  # chunked, past max_body
    with pytest.raises(PayloadTooLarge), reading(budget, "s", max_body=99, expected=3) as body:
        body.feed(b"1234")  # more than it declared
    assert budget.used == 0


def test_a_small_body_read_whole_is_verified_as_it_was_read_and_budgeted() -> None:
    budget = InFlight(10 * MB)
    body = b'{"zen": "small"}'
    with reading(budget, "s3cret", max_body=MB, expected=len(body)) as signed:
        assert budget.used == len(body)
        signed.feed_all(body)
        assert signed.verified(signature_for("s3cret", body)) is body  # kept, not copied
    assert budget.used == 0
    with pytest.raises(Unauthorized), reading(budget, "s3cret", max_body=MB, expected=5) as short:
        short.feed_all(b"abc")  # the client stopped early
        short.verified(signature_for("s3cret", b"abcde"))
    with pytest.raises(PayloadTooLarge), reading(budget, "s", max_body=99, expected=3) as long:
        long.feed_all(b"1234")
    with pytest.raises(ValueError), reading(budget, "s", max_body=99, expected=None) as chunked:
        chunked.feed_all(b"12")  # no declared length: fed chunk by chunk
    assert budget.used == 0


def test_the_budget_refuses_what_does_not_fit_and_keeps_room_for_small_bodies() -> None:
    budget = InFlight(64 * MB, large=MB, reserve=8 * MB)
    big = [SignedBody("s", max_body=25 * MB, expected=24 * MB, budget=budget) for _ in range(2)]
    with pytest.raises(Busy) as refused:
        SignedBody("s", max_body=25 * MB, expected=24 * MB, budget=budget)
    assert refused.value.retry_after == 5 and refused.value.status == 503
    with pytest.raises(Busy):  # 16 MB are free, but the last 8 are kept for small bodies
        SignedBody("s", max_body=25 * MB, expected=10 * MB, budget=budget)
    small = [SignedBody("s", max_body=25 * MB, expected=500_000, budget=budget) for _ in range(16)]
    chunked = SignedBody("s", max_body=25 * MB, expected=None, budget=budget)
    with pytest.raises(Busy):  # a chunked body takes its bytes as they come
        chunked.feed(b"x" * 8 * MB)
    for body in [*big, *small, chunked]:
        body.release()
    assert budget.used == 0


async def test_the_endpoint_answers_503_with_retry_after_when_the_budget_is_spent(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    from webhooks.deps import WEBHOOKS

    api = await api_factory(make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET)))
    api.raw.app[WEBHOOKS].receiver.budget = InFlight(1000, large=10_000, reserve=0)
    body = b'{"zen": "' + b"x" * 2000 + b'"}'
    response = await api.raw.post(
        "/api/github/webhooks", data=body, headers=webhook_headers(body, "ping")
    )
    assert response.status == 503 and response.headers["Retry-After"] == "5"
    assert (await response.json())["code"] == "busy"
    small = b'{"zen": "hi"}'
    response = await api.raw.post(
        "/api/github/webhooks", data=small, headers=webhook_headers(small, "ping")
    )
    assert response.status == 202


async def refused_raw(host: str, port: int, head: bytes) -> tuple[int, dict[str, str], Any]:
    """Send `head` on a raw socket (no client library would send it); the status, headers
    and JSON body of the answer, read until the server closes the connection."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(head)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)  # closed after the answer
    finally:
        writer.close()
    top, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, json.loads(body)


OVERSIZED = (
    b"POST /api/github/webhooks HTTP/1.1\r\nHost: x\r\nX-Junk: "
    + b"a" * 9000
    + b"\r\nContent-Length: 0\r\n\r\n"
)


def assert_refused_quietly(status: int, headers: dict[str, str], body: Any) -> None:
    assert status == 431
    assert headers["Content-Type"].startswith("application/json")
    assert body["code"] == "headers_too_large"
    assert "longer than 8190 bytes" in body["error"] and "aaaa" not in body["error"]


async def test_an_oversized_header_is_refused_with_431_json_and_one_log_line(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    url = api.raw.make_url("/api/github/webhooks")
    caplog.set_level(logging.DEBUG)
    assert_refused_quietly(*await refused_raw(str(url.host), int(url.port or 0), OVERSIZED))
    records = [r for r in caplog.records if r.name.endswith("http.server")]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING and records[0].exc_info is None
    assert "refused a malformed request" in records[0].getMessage()
    assert "Traceback" not in caplog.text and "aaaa" not in caplog.text
    # The service goes on answering.
    assert (await api.raw.get("/healthz")).status == 200


async def test_serve_refuses_an_oversized_header_with_431_json_and_one_log_line(
    tmp_path: Path,
) -> None:
    env = {
        "STEELFRAME_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "STEELFRAME_DATA_DIR": str(tmp_path / "var"),
        "STEELFRAME_CHECKOUT": str(tmp_path),
        "WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    async with serve(env, tmp_path, tmp_path / "serve.log") as served:
        assert_refused_quietly(*await refused_raw("127.0.0.1", served.port, OVERSIZED))
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{served.url}/healthz") as response:
                assert response.status == 200
        log = served.log_text()
    refusals = [line for line in log.splitlines() if "refused a malformed request" in line]
    assert len(refusals) == 1
    assert "Traceback" not in log and "aaaa" not in log


async def seed(api: ApiClient) -> None:
    now = utcnow()
    await store_deliveries(
        api.services.db,
        [
            NewDelivery(name, "issues", "opened", 1, "a/b", "{}", now)
            for name in ("done", "dead", "again", "rejected")
        ],
    )

    def finish(session: Any) -> None:
        status = {
            "done": DeliveryStatus.PROCESSED,
            "dead": DeliveryStatus.DEAD,
            "again": DeliveryStatus.RETRYING,
            "rejected": DeliveryStatus.REJECTED,
        }
        for row in session.query(WebhookDelivery):
            row.status = status[row.delivery_id]
            row.reason = "GitHubUnavailable: 502" if row.delivery_id == "dead" else None
            row.outcomes = '{"a.b": "ok", "c.d": "GitHubUnavailable: 502"}'

    api.services.db.call(finish)


async def test_operators_list_dead_letters_and_replay_them(api: ApiClient) -> None:
    await seed(api)
    response = await api.get("/api/operator/deliveries?status=dead")
    assert response.status == 200
    [dead] = (await response.json())["deliveries"]
    assert dead["delivery"] == "dead" and dead["reason"] == "GitHubUnavailable: 502"
    assert dead["handlers"] == {"a.b": "ok", "c.d": "GitHubUnavailable: 502"}
    failed = (await (await api.get("/api/operator/deliveries?status=failed")).json())["deliveries"]
    assert {d["delivery"] for d in failed} == {"dead", "again"}
    everything = (await (await api.get("/api/operator/deliveries")).json())["deliveries"]
    assert len(everything) == 4
    assert (await api.post("/api/operator/deliveries/dead/replay")).status == 200
    row = api.services.db.call(lambda s: s.get(WebhookDelivery, "dead"))
    # Back in line; the handler that succeeded stays recorded, so only the other one runs.
    assert row.status == DeliveryStatus.RECEIVED and row.attempts == 0 and '"ok"' in row.outcomes
    assert (await api.post("/api/operator/deliveries/nope/replay")).status == 404
    assert (await api.post("/api/operator/deliveries/rejected/replay")).status == 409
    for bad in ("%00", "x" * 101, "a%0Ab"):
        response = await api.post(f"/api/operator/deliveries/{bad}/replay")
        assert response.status == 400 and (await response.json())["detail"]["field"] == "id"


@pytest.mark.parametrize(
    "query",
    ["status=nonsense", "limit=0", "limit=501", "limit=x", "status=%00", "limit=" + "9" * 5000],
)
async def test_bad_delivery_queries_are_400_and_change_nothing(api: ApiClient, query: str) -> None:
    response = await api.get(f"/api/operator/deliveries?{query}")
    assert response.status == 400
    body = await response.json()
    assert body["error"] and body["detail"]["field"] in ("status", "limit")


async def test_the_delivery_log_needs_an_operator_token(api: ApiClient) -> None:
    assert (await api.raw.get("/api/operator/deliveries")).status == 401
    assert (await api.raw.post("/api/operator/deliveries/x/replay")).status == 401
