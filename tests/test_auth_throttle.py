"""Failed authentications are throttled per client address and per token prefix (429 with
Retry-After, exponential backoff up to a ceiling), and a correct token is never held back;
the state is in Redis when there is one, shared by every instance (issue 35)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.errors import TooManyRequests
from http_edge.throttle import AuthThrottle, MemoryStore, backoff, scopes_for
from tests.conftest import ApiClient, make_settings

BOARD = "/api/operator/board"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wrong_token() -> str:
    return "sfo_" + secrets.token_urlsafe(32)


async def flood(api: ApiClient, count: int) -> list[Any]:
    """`count` wrong tokens, one after another, as fast as the client goes."""
    return [await api.raw.get(BOARD, headers=bearer(wrong_token())) for _ in range(count)]


async def test_the_200th_wrong_token_in_a_second_is_429_and_the_right_one_works_at_once(
    api: ApiClient,
) -> None:
    assert (await api.raw.get(BOARD, headers=bearer(api.token))).status == 200  # in use
    answers = await flood(api, 200)
    statuses = [answer.status for answer in answers]
    assert statuses[:10] == [401] * 10  # the free failures: a typo costs nothing
    assert statuses[-1] == 429 and statuses.count(401) < 20
    last = answers[-1]
    assert 1 <= int(last.headers["Retry-After"]) <= 60
    assert (await last.json())["code"] == "too_many_requests"
    started = time.monotonic()
    assert (await api.raw.get(BOARD, headers=bearer(api.token))).status == 200
    assert time.monotonic() - started < 1.0
    # The block holds for cookies and the GUI's sign-in too (same address).
    assert (await api.raw.post("/gui/session", json={"token": wrong_token()})).status == 429


async def test_the_state_is_shared_through_redis(
    api_factory: Callable[..., Any], tmp_path: Path, redis_url: str
) -> None:
    first = await api_factory(make_settings(tmp_path, redis_url=redis_url))
    second = await api_factory(make_settings(tmp_path, redis_url=redis_url))
    # The operator's token is in use on the first instance; the second never saw it.
    assert (await first.raw.get(BOARD, headers=bearer(second.token))).status == 200
    await flood(first, 12)
    keys = redis.Redis.from_url(redis_url).keys("steelframe:auth:block:*")
    assert {key.decode().split(":", 3)[3].split(":")[0] for key in keys} >= {"addr"}
    # Another instance refuses the same address at once, and still takes the right token
    # (known good through Redis, so not held back).
    refused = await second.raw.get(BOARD, headers=bearer(wrong_token()))
    assert refused.status == 429 and "Retry-After" in refused.headers
    assert (await second.raw.get(BOARD, headers=bearer(second.token))).status == 200


async def test_a_token_prefix_is_blocked_from_every_address() -> None:
    throttle = AuthThrottle(MemoryStore(), free_failures=3, ceiling=60)
    guessed = "sfo_AbCdEfGh"  # a leaked start of a token, varied by a guesser
    for n in range(4):
        scopes = scopes_for(f"10.0.0.{n}", f"{guessed}{n}")
        await throttle.before(f"digest-{n}", scopes)
        await throttle.failed(f"digest-{n}", scopes)
    with pytest.raises(TooManyRequests) as blocked:
        await throttle.before("digest-9", scopes_for("10.9.9.9", f"{guessed}x"))
    assert blocked.value.retry_after == 1
    # Another prefix from a fresh address is not held back; a digest verified before never is.
    await throttle.before("digest-new", scopes_for("10.9.9.9", "sfo_Zz"))
    await throttle.succeeded("digest-good")
    await throttle.before("digest-good", scopes_for("10.0.0.1", f"{guessed}y"))


def test_backoff_doubles_up_to_the_ceiling() -> None:
    waits = [backoff(n, free=10, ceiling=60) for n in range(9, 20)]
    assert waits == [0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60]
