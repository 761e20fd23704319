"""A message sent with one idempotency key through two real `serve` processes at the same
moment (a client's retry racing its first send behind a load balancer, on one PostgreSQL and
one Redis): one turn runs, and both sends answer it. The send refused the operator's turn
slot got the 409 of one turn per operator ("a turn is already in flight") when the other
had not yet committed its claim of the key, or "no longer running" when the other's first
frame had not yet reached the relay; now it waits for that turn, which the slot names by its
key, and attaches to it, as a retry does (bot/chat/key_joins.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.fakes.openai_server import FakeOpenAI, answer
from tests.test_instances import MODEL
from tests.test_instances import instances as instances  # two serve processes

pytestmark = pytest.mark.slow  # two real `serve` processes

ROUNDS = 8  # each a race: the slot and the key's claim taken in either order


async def _send(http: aiohttp.ClientSession, url: str, key: str) -> tuple[int, Any]:
    async with http.post(
        f"{url}/api/operator/chat",
        json={"message": "what changed since yesterday?"},
        headers={"Idempotency-Key": key},
    ) as response:
        return response.status, await response.json()


async def test_one_key_sent_through_both_instances_at_once_runs_one_turn_both_answer(
    instances: tuple[list[str], str, FakeOpenAI, str],
) -> None:
    (a, b), token, model, _ = instances
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for n in range(ROUNDS):
            model.enqueue(MODEL, answer(f"Answer {n}."))
            key = f"message-{n}"
            answers = await asyncio.gather(_send(http, a, key), _send(http, b, key))
            assert [status for status, _ in answers] == [200, 200], (n, answers)
            [(_, first), (_, second)] = answers
            assert first["turn_id"] == second["turn_id"], (n, answers)
            assert first["reply"] == second["reply"] == f"Answer {n}."
        history = await (await http.get(f"{a}/api/operator/chat?limit=500")).json()
    assert len(model.requests) == ROUNDS  # one model call a key: one turn each
    assert [m["content"] for m in history["messages"] if m["role"] == "assistant"] == [
        f"Answer {n}." for n in range(ROUNDS)
    ]
