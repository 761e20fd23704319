"""Property-based fuzzing: no input reaches a 5xx.

Schemathesis reads the service's own /api/openapi.json from a real server on loopback and
generates requests for every operation, valid (positive) and invalid (negative), each with
and without the operator's token; a Hypothesis fuzzer does the same for the GitHub webhook
endpoint over headers and bodies, signed and unsigned. The service runs with everything
configured (SQLite, real Redis, the GitHub sandbox), so no answer is "not configured".
Bounded examples keep the suite fast; a failure prints the request that reproduces it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from tests.conftest import WEBHOOK_SECRET, ApiClient, GitHubSandbox, webhook_headers
from tests.fakes.ports import refused_port

EXAMPLES = 12  # per operation and mode; raise locally with STEELFRAME_TEST_FUZZ_EXAMPLES
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # no .hypothesis folder in the checkout
    suppress_health_check=list(HealthCheck),
)


def _examples() -> int:
    import os

    return int(os.environ.get("STEELFRAME_TEST_FUZZ_EXAMPLES", EXAMPLES))


# Probes answer their own report (`status`, `checks`), 503 when a dependency is down.
PROBES = ("/readyz", "/healthz")


def _check(response: Any, label: str, unavailable_ok: bool) -> None:
    status = response.status_code
    allowed = unavailable_ok and status == 503
    assert status < 500 or allowed, f"{label} -> {status}: {response.text[:500]}"
    if status >= 400:
        body = response.json()  # every error is JSON ...
        key = "status" if any(f" {probe} " in label for probe in PROBES) else "error"
        assert isinstance(body, dict) and body.get(key), (label, body)  # ... with a reason


def _fuzz_operation(
    operation: Any, mode: Any, base_url: str, token: str, unavailable_ok: bool
) -> int:
    calls = 0

    @given(case=operation.as_strategy(generation_mode=mode), authed=st.booleans())
    @settings(FUZZ_SETTINGS, max_examples=_examples())
    def run(case: Any, authed: bool) -> None:
        nonlocal calls
        headers = dict(case.headers or {})
        headers.pop("Authorization", None)
        if authed:
            headers["Authorization"] = f"Bearer {token}"
        case.headers = headers
        response = case.call(base_url=base_url, timeout=30)
        calls += 1
        label = f"{case.method} {case.formatted_path} ({mode.value}, {authed=})"
        content_type = (response.headers.get("content-type") or [""])[0]
        if content_type.startswith("text/event-stream"):
            assert response.status_code == 200, label  # a stream that started is a 200
            return
        _check(response, label, unavailable_ok)

    try:
        run()
    except Unsatisfiable:
        # Negative mode for an operation with nothing to get wrong (no parameters, no body).
        assert mode == schemathesis.GenerationMode.NEGATIVE, operation.label
    return calls


# Streams that never end by themselves: schemathesis reads a stream to its end, and the
# heartbeats keep its read timeout from ever firing. tests/test_events.py sends the events
# stream its bad input (401, 400 on Last-Event-ID) and reads it with a deadline.
ENDLESS_STREAMS = frozenset({"/api/operator/events"})


BOTH_MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)


def _fuzz_schema(
    base_url: str,
    token: str,
    *,
    unavailable_ok: bool = False,
    modes: tuple[schemathesis.GenerationMode, ...] = BOTH_MODES,
) -> dict[str, int]:
    schema = schemathesis.openapi.from_url(f"{base_url}/api/openapi.json")
    calls: dict[str, int] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in ENDLESS_STREAMS:
            continue
        for mode in modes:
            label = f"{operation.method.upper()} {operation.path} {mode.value}"
            calls[label] = _fuzz_operation(operation, mode, base_url, token, unavailable_ok)
    return calls


@pytest.fixture
async def service(
    api_factory: Any,
    github_sandbox: GitHubSandbox,
    tmp_path: Path,
    redis_url: str,
    any_db_url: str,
) -> ApiClient:
    """The whole service on each database: the sandbox App (webhooks both ways) and the task
    lifecycle."""
    settings = github_sandbox.settings(tmp_path, redis_url=redis_url, database_url=any_db_url)
    api: ApiClient = await api_factory(settings)
    github_sandbox.deliver_to(str(api.raw.make_url("/api/github/webhooks")))
    return api


@pytest.mark.slow
async def test_no_operation_of_the_openapi_document_answers_5xx(service: ApiClient) -> None:
    base_url = str(service.raw.make_url("")).rstrip("/")
    calls = await asyncio.to_thread(_fuzz_schema, base_url, service.token)
    document = (await (await service.raw.get("/api/openapi.json")).json())["paths"]
    # Every operation but the document schemathesis itself was loaded from.
    operations = {f"{m.upper()} {p}" for p, ops in document.items() for m in ops}
    operations.discard("GET /api/openapi.json")
    operations -= {f"GET {path}" for path in ENDLESS_STREAMS}
    fuzzed = {label.rsplit(" ", 1)[0] for label, n in calls.items() if n > 0}
    assert fuzzed == operations, json.dumps(calls)  # every operation was really exercised
    negative = [label for label, n in calls.items() if label.endswith("negative") and n > 0]
    assert len(negative) >= len(operations) // 2, calls  # and most with invalid input too


@pytest.mark.slow
async def test_with_redis_down_operations_answer_503_with_a_reason_never_500(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    down = f"redis://127.0.0.1:{refused_port()}/0"  # a port nothing listens on: Redis is down
    api: ApiClient = await api_factory(github_sandbox.settings(tmp_path, redis_url=down))
    base_url = str(api.raw.make_url("")).rstrip("/")
    # Valid requests only (with and without the token): they are what gets through
    # authentication and validation to the work that needs Redis. The test above sends every
    # operation invalid input on both databases; sending it again here, with Redis down,
    # cost two thirds of this test's CPU (invalid cases are the costlier to generate).
    calls = await asyncio.to_thread(
        _fuzz_schema,
        base_url,
        api.token,
        unavailable_ok=True,
        modes=(schemathesis.GenerationMode.POSITIVE,),
    )
    assert calls["POST /api/operator/chat positive"] > 0
    assert all(n > 0 for n in calls.values()), calls  # every operation was reached


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
# Header values an HTTP client can send: Latin-1 without control characters (aiohttp hands
# the bytes above ASCII to us as they came), no leading or trailing space.
HEADER_TEXT = st.text(st.characters(codec="latin-1", exclude_categories=["Cc"]), max_size=60).map(
    str.strip
)
EVENTS = (
    st.sampled_from(["issues", "issue_comment", "installation", "ping", "push", ""]) | HEADER_TEXT
)


def _payload(event: str) -> st.SearchStrategy[Any]:
    """Bodies shaped like GitHub's (so routing and handlers run) or anything at all."""
    issue = st.fixed_dictionaries(
        {"number": st.integers() | st.text(), "title": st.text(), "labels": JSONISH},
    )
    shaped = st.fixed_dictionaries(
        {
            "action": st.sampled_from(["opened", "labeled", "created", "reopened"]) | st.text(),
            "repository": st.fixed_dictionaries({"full_name": st.text() | st.integers()}) | JSONISH,
            "issue": issue | JSONISH,
            "comment": JSONISH,
            "sender": JSONISH,
            "installation": JSONISH,
        }
    )
    return shaped | JSONISH


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[bytes, dict[str, str]]:
    event = draw(EVENTS)
    if draw(st.booleans()):
        body = json.dumps(draw(_payload(event))).encode()
    else:
        body = draw(st.binary(max_size=2048))
    headers = webhook_headers(body, event, secret=WEBHOOK_SECRET)
    if draw(st.booleans()):  # tamper with any header, or drop it
        name = draw(st.sampled_from(sorted(headers)))
        replacement = draw(st.none() | HEADER_TEXT)
        if replacement is None:
            del headers[name]
        else:
            headers[name] = replacement
    extra = draw(
        st.dictionaries(
            st.text(
                st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"),
                min_size=1,
                max_size=20,
            ),
            HEADER_TEXT,
            max_size=3,
        )
    )
    return body, {**extra, **headers}


def _fuzz_webhooks(url: str) -> int:
    calls = 0

    @given(delivery=deliveries())
    @settings(FUZZ_SETTINGS, max_examples=_examples() * 8)
    def run(delivery: tuple[bytes, dict[str, str]]) -> None:
        nonlocal calls
        body, headers = delivery
        response = requests.post(url, data=body, headers=headers, timeout=30)
        calls += 1
        assert response.status_code < 500, f"{headers} {body[:200]!r} -> {response.text[:300]}"

    run()
    return calls


@pytest.mark.slow
async def test_no_webhook_delivery_answers_5xx(service: ApiClient) -> None:
    url = str(service.raw.make_url("/api/github/webhooks"))
    calls = await asyncio.to_thread(_fuzz_webhooks, url)
    assert calls >= _examples() * 8


def test_retry_jitter_leaves_the_global_random_state_alone() -> None:
    """The fuzzers draw examples from the global `random` state, seeded per example, while
    the service answers in the same process: a failed delivery's backoff that drew from it
    would make an example irreproducible (Hypothesis reports that as a flaky failure)."""
    import random

    from webhooks.delivery_retry import RetryPolicy

    before = random.getstate()
    delays = {RetryPolicy().delay(3) for _ in range(20)}
    assert random.getstate() == before
    assert len(delays) > 1 and all(10.0 <= d <= 20.0 for d in delays)  # still jittered
