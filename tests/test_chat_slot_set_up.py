"""A send refused the operator's turn slot through another instance while the turn holding
it is still being set up (its slot claimed, its session being placed): the slot names that
turn's session from its claim when the send named one, and the refused send waits (bounded)
for the set-up, as a send on the same instance does (bot/chat/coordination.py,
`claim_slot`). So its 409 names the session to look at, and a set-up that is refused frees
the slot for it: the same message with the same key, sent through both instances at once,
gets the same refusal from both. Before, the 409 named no session (nothing to re-attach
to), and the second send of a refused message got a 409 (a turn "in flight" that never ran).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import create_engine, text, update

from bot.chat.coordination import RedisTurnLocks, claim_slot, slot_key
from bot.chat.session_rows import new_session_row
from bot.clock import utcnow
from bot.models import Agent, Operator
from bot.operators import authenticate
from tests.conftest import ApiClient, make_settings
from tests.fakes.lifecycle import wait_for


def _operator(api: ApiClient) -> int:
    operator_id: int = api.services.db.call(authenticate, api.token).id
    return operator_id


async def test_a_slot_claimed_for_a_named_session_names_it_while_being_set_up(
    redis_url: str,
) -> None:
    elsewhere = RedisTurnLocks(redis_url)
    here = RedisTurnLocks(redis_url)
    try:
        assert await elsewhere.acquire(5, "turn-elsewhere", session_id="sessionA") is None
        held = await claim_slot(here, 5, "turn-here", wait=0)  # no wait: the claim says it
        assert held is not None and held.placing
        assert (held.turn_id, held.session_id) == ("turn-elsewhere", "sessionA")
    finally:
        await elsewhere.close()
        await here.close()


async def test_a_409_through_another_instance_names_the_session_its_turn_is_placed_in(
    api_factory: Any, tmp_path: Path, redis_url: str
) -> None:
    api = await api_factory(make_settings(tmp_path, redis_url=redis_url))
    operator = _operator(api)
    # Another instance claims the operator's slot for a send that named no session: its
    # session is being placed (a read) when this instance is sent another message.
    elsewhere = RedisTurnLocks(redis_url)
    try:
        assert await elsewhere.acquire(operator, "turn-elsewhere") is None
        refused = asyncio.create_task(api.post("/api/operator/chat", json={"message": "me too"}))
        await wait_for(lambda: api.services.registry.for_operator(operator) or refused.done())
        await elsewhere.describe(operator, "turn-elsewhere", "placedsession")
        answer = await refused
        assert answer.status == 409
        detail = (await answer.json())["detail"]
        assert (detail["session"], detail["turn_id"]) == ("placedsession", "turn-elsewhere")
    finally:
        await elsewhere.release(operator, "turn-elsewhere")
        await elsewhere.close()


async def test_one_key_sent_through_two_instances_whose_set_up_is_refused_is_refused_twice(
    api_factory: Any, tmp_path: Path, redis_url: str, pg_url: str
) -> None:
    """The operator's chat is on an agent no longer configured: the message is refused
    (400) as its turn is placed. Sent with one key through both instances at once (a retry
    racing its first send), the second send, refused the slot while the first was being
    placed, gets that refusal too, not a 409 for a turn that never ran."""
    settings = make_settings(tmp_path, redis_url=redis_url, database_url=pg_url)
    first = await api_factory(settings)
    second = (await api_factory(settings)).as_operator(first.token)
    operator = _operator(first)

    def retired_chat(session: Any) -> None:
        now = utcnow()
        session.add(Agent(name="retired", repo="o/r", checkout="/c", runtime="x", updated_at=now))
        row = new_session_row(operator, agent="retired")
        session.add(row)
        session.flush()
        session.execute(
            update(Operator).where(Operator.id == operator).values(active_session_id=row.id)
        )

    first.services.db.call(retired_chat)
    slots = redis.Redis.from_url(redis_url)
    holding = create_engine(pg_url).connect()
    send = {"json": {"message": "summarise it"}, "headers": {"Idempotency-Key": "k-refused"}}
    try:
        # The first send's set-up is held where it places the turn (its read of the chat).
        holding.execute(text("LOCK TABLE chat_sessions IN ACCESS EXCLUSIVE MODE"))
        sent = asyncio.create_task(first.post("/api/operator/chat", **send))
        await wait_for(lambda: slots.get(slot_key(operator)) or sent.done())
        again = asyncio.create_task(second.post("/api/operator/chat", **send))
        await wait_for(lambda: second.services.registry.for_operator(operator) or again.done())
        holding.rollback()  # placed: refused
        answers = [await sent, await again]
        assert [a.status for a in answers] == [400, 400]
        [refusal, same] = [await a.json() for a in answers]
        assert refusal == same and refusal["detail"]["field"] == "agent"
        assert "no longer configured" in refusal["error"]
        # Nothing ran: the chat has no message, and the slot is free.
        shown = await (await first.get("/api/operator/chat")).json()
        assert shown["messages"] == []
        assert slots.get(slot_key(operator)) is None
    finally:
        holding.close()
        holding.engine.dispose()
        slots.close()
