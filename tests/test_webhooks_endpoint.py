"""POST /api/github/webhooks: signatures, the delivery log, bad input, redelivery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import func, select

from bot.config import Settings
from bot.config_values import Secret
from tests.conftest import GITHUB_DATA, WEBHOOK_SECRET, ApiClient, make_settings, webhook_headers
from tests.fakes.patience import PATIENCE_SECONDS
from webhooks.deliveries import DeliveryBody, DeliveryStatus, WebhookDelivery
from webhooks.deps import WEBHOOKS
from webhooks.router import build_router
from webhooks.routing import WebhookContext, handles

PATH = "/api/github/webhooks"
EXAMPLES = sorted((GITHUB_DATA / "webhook-examples").rglob("*.json"))


def webhook_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return make_settings(tmp_path, webhook_secret=Secret(WEBHOOK_SECRET), **overrides)


@pytest.fixture
async def hooks(api_factory: Callable[..., Any], tmp_path: Path) -> ApiClient:
    return await api_factory(webhook_settings(tmp_path))


def rows(api: ApiClient) -> list[WebhookDelivery]:
    return api.services.db.call(
        lambda s: list(s.scalars(select(WebhookDelivery).order_by(WebhookDelivery.received_at)))
    )


def count(api: ApiClient) -> int:
    return int(
        api.services.db.call(lambda s: s.scalar(select(func.count(WebhookDelivery.delivery_id))))
    )


async def post(api: ApiClient, body: bytes, headers: dict[str, str]) -> Any:
    return await api.raw.post(PATH, data=body, headers=headers)


async def drain(api: ApiClient) -> None:
    await asyncio.wait_for(api.raw.app[WEBHOOKS].processor.drain(), PATIENCE_SECONDS)


def counting_router(
    calls: list[str], *, fail: bool = False, gate: asyncio.Event | None = None
) -> Router:
    router = Router()

    @handles(router, "issues", action="opened", needs={"issue.number": int})
    async def count_it(event: Event, ctx: WebhookContext) -> None:
        calls.append(event.delivery_id)
        if gate is not None:
            await gate.wait()
        if fail:
            raise RuntimeError("the handler broke")

    return router


def example(event: str, name: str) -> bytes:
    return (GITHUB_DATA / "webhook-examples" / event / name).read_bytes()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_every_real_example_is_stored_and_processed(hooks: ApiClient, path: Path) -> None:
    body = example(path.parent.name, path.name)
    event = path.parent.name
    tampered = body.replace(b"}", b" }", 1)
    refused = await post(hooks, tampered, {**webhook_headers(body, event)})
    assert refused.status == 401 and count(hooks) == 0
    response = await post(hooks, body, webhook_headers(body, event, delivery="d-1"))
    assert response.status == 202, await response.text()
    await drain(hooks)
    [row] = rows(hooks)
    data = json.loads(body)
    assert (row.delivery_id, row.event, row.action) == ("d-1", event, data.get("action"))
    stored = hooks.services.db.call(lambda s: s.get(DeliveryBody, "d-1").body)
    assert stored == body.decode()  # exactly as signed
    assert row.status in (DeliveryStatus.PROCESSED, DeliveryStatus.IGNORED), row.reason
    assert row.repo == data.get("repository", {}).get("full_name")


async def test_known_events_are_processed_and_others_ignored(hooks: ApiClient) -> None:
    for event, name in [("issues", "opened.payload.json"), ("issues", "assigned.payload.json")]:
        body = example(event, name)
        assert (await post(hooks, body, webhook_headers(body, event, delivery=name))).status == 202
    star = b'{"action": "created", "starred_at": null}'
    assert (await post(hooks, star, webhook_headers(star, "star", delivery="star"))).status == 202
    await drain(hooks)
    status = {row.delivery_id: row.status for row in rows(hooks)}
    assert status == {
        "opened.payload.json": DeliveryStatus.PROCESSED,
        "assigned.payload.json": DeliveryStatus.IGNORED,
        "star": DeliveryStatus.IGNORED,
    }


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Hub-Signature-256": "sha256=" + "0" * 64},
        {"X-Hub-Signature": "sha1=0000"},
    ],
    ids=["missing", "wrong", "sha1-only"],
)
async def test_missing_or_wrong_signature_is_401_and_nothing_stored(
    hooks: ApiClient, headers: dict[str, str]
) -> None:
    body = example("issues", "opened.payload.json")
    sent = {k: v for k, v in webhook_headers(body, "issues").items() if k != "X-Hub-Signature-256"}
    response = await post(hooks, body, {**sent, **headers})
    assert response.status == 401
    assert (await response.json())["code"] == "unauthorized"
    assert count(hooks) == 0


async def test_secret_from_another_app_is_401(hooks: ApiClient) -> None:
    body = example("issues", "opened.payload.json")
    response = await post(hooks, body, webhook_headers(body, "issues", secret="not ours"))
    assert response.status == 401 and count(hooks) == 0


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
async def test_missing_delivery_headers_are_400_and_nothing_stored(
    hooks: ApiClient, missing: str
) -> None:
    body = example("issues", "opened.payload.json")
    headers = {k: v for k, v in webhook_headers(body, "issues").items() if k != missing}
    response = await post(hooks, body, headers)
    assert response.status == 400
    assert missing in (await response.json())["error"]
    assert count(hooks) == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [(b"{not json", "not JSON"), (b"[1, 2]", "JSON list, not an object"), (b"", "not JSON")],
)
async def test_malformed_payload_is_400_and_stored_as_rejected(
    hooks: ApiClient, body: bytes, reason: str
) -> None:
    response = await post(hooks, body, webhook_headers(body, "issues", delivery="bad"))
    assert response.status == 400
    answer = await response.json()
    assert answer["code"] == "bad_request" and reason in answer["detail"]["reason"]
    [row] = rows(hooks)
    assert row.status == DeliveryStatus.REJECTED and reason in (row.reason or "")


async def test_payload_missing_what_a_handler_needs_is_400_and_rejected(hooks: ApiClient) -> None:
    data = json.loads(example("issues", "opened.payload.json"))
    del data["issue"]["number"]
    data["repository"]["id"] = "not a number"
    body = json.dumps(data).encode()
    response = await post(hooks, body, webhook_headers(body, "issues", delivery="lacking"))
    assert response.status == 400
    answer = await response.json()
    assert answer["detail"]["missing"] == ["issue.number (int)", "repository.id (int)"]
    [row] = rows(hooks)
    assert row.status == DeliveryStatus.REJECTED
    assert row.reason == "payload lacks issue.number (int), repository.id (int)"


async def test_body_over_25_mb_is_413_and_nothing_stored(hooks: ApiClient) -> None:
    body = b'{"pad": "' + b"x" * (25 * 1024 * 1024) + b'"}'
    response = await post(hooks, body, webhook_headers(body, "issues"))
    assert response.status == 413
    assert (await response.json())["code"] == "payload_too_large"
    assert count(hooks) == 0


async def test_without_a_webhook_secret_deliveries_are_refused(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    api = await api_factory(make_settings(tmp_path))
    body = example("ping", "payload.json")
    response = await post(api, body, webhook_headers(body, "ping"))
    assert response.status == 503 and count(api) == 0


async def test_form_encoded_delivery_is_accepted(hooks: ApiClient) -> None:
    from urllib.parse import urlencode

    body = urlencode({"payload": example("ping", "payload.json").decode()}).encode()
    headers = {
        **webhook_headers(body, "ping", delivery="form"),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    assert (await post(hooks, body, headers)).status == 202
    await drain(hooks)
    assert rows(hooks)[0].status == DeliveryStatus.PROCESSED


async def test_same_delivery_sent_100_times_is_processed_once(
    api_factory: Callable[..., Any], tmp_path: Path, any_db_url: str
) -> None:
    api = await api_factory(webhook_settings(tmp_path, database_url=any_db_url))
    calls: list[str] = []
    api.raw.app[WEBHOOKS].processor.router = build_router(counting_router(calls))
    body = example("issues", "opened.payload.json")
    headers = webhook_headers(body, "issues", delivery="same-guid")
    first = await post(api, body, headers)
    assert first.status == 202
    # The other 99 at once: some land in one write batch, some after the first committed.
    statuses = await asyncio.gather(*[post(api, body, headers) for _ in range(99)])
    assert [r.status for r in statuses] == [200] * 99
    assert {(await r.json())["status"] for r in statuses} == {"duplicate"}
    await drain(api)
    [row] = rows(api)
    assert calls == ["same-guid"] and row.attempts == 1 and row.status == DeliveryStatus.PROCESSED


async def test_concurrent_first_copies_of_a_delivery_store_one_row(
    api_factory: Callable[..., Any], tmp_path: Path
) -> None:
    api = await api_factory(webhook_settings(tmp_path))
    calls: list[str] = []
    api.raw.app[WEBHOOKS].processor.router = build_router(counting_router(calls))
    body = example("issues", "opened.payload.json")
    headers = webhook_headers(body, "issues", delivery="raced")
    answers = await asyncio.gather(*[post(api, body, headers) for _ in range(20)])
    assert sorted(r.status for r in answers) == [200] * 19 + [202]
    await drain(api)
    assert calls == ["raced"] and count(api) == 1


async def test_answer_comes_before_processing(hooks: ApiClient) -> None:
    calls: list[str] = []
    gate = asyncio.Event()
    hooks.raw.app[WEBHOOKS].processor.router = build_router(counting_router(calls, gate=gate))
    body = example("issues", "opened.payload.json")
    response = await post(hooks, body, webhook_headers(body, "issues", delivery="slow"))
    assert response.status == 202
    [row] = rows(hooks)  # durable before the answer...
    assert row.status in (DeliveryStatus.RECEIVED, DeliveryStatus.PROCESSING)
    gate.set()  # ...and processed after it
    await drain(hooks)
    assert rows(hooks)[0].status == DeliveryStatus.PROCESSED and calls == ["slow"]


async def test_a_handler_failure_is_stored_with_the_reason_and_a_retry_time(
    hooks: ApiClient,
) -> None:
    calls: list[str] = []
    hooks.raw.app[WEBHOOKS].processor.router = build_router(counting_router(calls, fail=True))
    body = example("issues", "opened.payload.json")
    assert (await post(hooks, body, webhook_headers(body, "issues", delivery="f"))).status == 202
    # The first attempt recorded, not its retries (plain `drain` waits for those too).
    drained = hooks.raw.app[WEBHOOKS].processor.drain(retries_within=0.0)
    await asyncio.wait_for(drained, PATIENCE_SECONDS)
    [row] = rows(hooks)
    assert row.status == DeliveryStatus.RETRYING and row.attempts == 1
    assert row.reason == "RuntimeError: the handler broke"
    assert row.next_attempt_at is not None and row.next_attempt_at > row.received_at
    outcomes = json.loads(row.outcomes or "{}")
    assert outcomes["tests.test_webhooks_endpoint.counting_router.<locals>.count_it"] == (
        "RuntimeError: the handler broke"
    )
    assert outcomes["webhooks.handlers.issues.on_issue"] == "ok"


async def test_payload_not_utf8_is_400_and_stored_as_rejected(hooks: ApiClient) -> None:
    # msgspec would skip the bad byte inside a string it does not read (webhooks.fields).
    body = example("issues", "opened.payload.json").replace(b"Hello-World", b"Hello-W\xfforld", 1)
    assert b"\xff" in body
    response = await post(hooks, body, webhook_headers(body, "issues", delivery="latin"))
    assert response.status == 400
    assert "not JSON" in (await response.json())["detail"]["reason"]
    [row] = rows(hooks)
    assert row.status == DeliveryStatus.REJECTED


async def test_number_out_of_range_outside_what_intake_reads_is_dead_lettered(
    hooks: ApiClient,
) -> None:
    """The one documented difference of reading fields without a full parse
    (webhooks.fields): acknowledged, then dead as "body is not JSON", never processed."""
    data = json.loads(example("issues", "opened.payload.json"))
    body = json.dumps(data).replace('"comments": 0', '"comments": 1e400', 1).encode()
    assert b"1e400" in body
    response = await post(hooks, body, webhook_headers(body, "issues", delivery="huge"))
    assert response.status == 202
    await drain(hooks)
    [row] = rows(hooks)
    assert (row.status, row.reason) == (DeliveryStatus.DEAD, "body is not JSON")
