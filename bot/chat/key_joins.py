"""Sends with the same idempotency key at the same moment through two instances: the one
refused the operator's turn slot joins the turn the other is starting, as a retry would,
instead of answering the 409 of one turn per operator.

On one instance the registry already serialises them (`TurnRegistry.settle` waits for the
first send's set-up, whose claim of the key comes before its launch). Across instances the
second send sees only the slot in Redis, and two moments when the first turn is running but
not yet found: before its key's claim is committed (a write batched with other turns'), and
after it but before its first frame reaches the relay (bot.chat.frames). The slot names the
key of the turn holding it (bot.chat.coordination.Slot), so the second send waits through
those moments only when the turn in the way is its own key's, never behind another message's
turn, and never past the set-up wait (bot.chat.coordination.SET_UP_WAIT_SECONDS). (The
first send's set-up itself, up to its key's claim, the second waited out as it claimed the
slot (`claim_slot`): had it been refused, the second would have taken the slot and been set
up itself.) Knows nothing of HTTP."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.chat.coordination import LOOK_AGAIN_SECONDS, SET_UP_WAIT_SECONDS, TurnLocks
from bot.chat.inflight import TurnRegistry
from bot.chat.turn_keys import (
    KeyState,
    RecordedTurn,
    TurnFrames,
    find_keyed_turn,
    no_longer_running,
    read_key,
)
from bot.db import Database


@dataclass(frozen=True)
class KeyJoins:
    db: Database
    locks: TurnLocks
    registry: TurnRegistry

    async def claimed(self, operator_id: int, key: str) -> KeyState | None:
        """After the send was refused the operator's slot: the key's claim, once the turn
        holding the slot, started with this key through another instance, has committed
        it; None when the turn holding the slot is not this key's (or none holds it now:
        the refusal stands, and a send again runs)."""
        deadline = asyncio.get_running_loop().time() + SET_UP_WAIT_SECONDS
        while True:
            state = await self.db.run(read_key, key)
            if state is not None:
                return state
            holder = await self.locks.holder(operator_id)
            late = asyncio.get_running_loop().time() > deadline
            if holder is None or holder.key != key or late:
                return None
            await asyncio.sleep(LOOK_AGAIN_SECONDS)

    async def frames(self, state: KeyState, *, operator_id: int, key: str) -> TurnFrames:
        """The frames of the key's turn (bot.chat.turn_keys.find_keyed_turn), waiting while
        it holds the operator's slot but is found nowhere yet (launched through another
        instance, its first frame not relayed yet). A turn found nowhere that no longer
        holds the slot ended meanwhile (its end is recorded before its slot goes) or was
        killed: the 409 of a key whose turn recorded no end."""
        turn = state.turn
        deadline = asyncio.get_running_loop().time() + SET_UP_WAIT_SECONDS
        while True:
            found = await find_keyed_turn(state, operator_id=operator_id, registry=self.registry)
            if found is not None:
                return found
            holder = await self.locks.holder(operator_id)
            held = holder is not None and holder.turn_id == turn.turn_id
            if not held or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(LOOK_AGAIN_SECONDS)
        again = await self.db.run(read_key, key)
        if again is not None and again.end is not None:
            return RecordedTurn.of(again.turn, again.end)
        raise no_longer_running(turn)
