"""`RedisFrameRelay`, the `FrameRelay` of a deployment with Redis (bot.chat.frames): the
writing side (bot.chat.frame_outbox) and the reading side (bot.chat.frame_reader) on their
own clients, and the relayed turns listed and written again in place for a `forget that
<words>` (bot.chat.relay_rewrites)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from bot.chat.coordination import SLOT_TTL_SECONDS
from bot.chat.frame_outbox import DEFAULT_MAX_HELD, FrameOutbox
from bot.chat.frame_reader import FrameReader
from bot.chat.frames import (
    PREFIX,
    FramesChange,
    NumberedFrame,
    OwnerGoneRecord,
    RelayedTurn,
)
from bot.chat.relay_rewrites import first_frames, rewrite_stream
from bot.contracts.chat import StatusFrame
from bot.redis_clients import DEFAULT_LONGEST_BLOCK


class RedisFrameRelay:
    """Every frame relayed through Redis, readable from any instance (bot.chat.frames)."""

    def __init__(
        self,
        url: str,
        *,
        linger: float,
        longest_block: float = DEFAULT_LONGEST_BLOCK,
        max_held: int = DEFAULT_MAX_HELD,
        slot_ttl: float = SLOT_TTL_SECONDS,
        catch_up: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`catch_up`: the forgets missed while Redis was away, done before the frames that
        waited for it are written (bot.chat.coordination.RedisTurnLocks.catch_up_forgets)."""
        self._outbox = FrameOutbox(url, linger=linger, max_held=max_held, catch_up=catch_up)
        self._reader = FrameReader(
            url, linger=linger, longest_block=longest_block, slot_ttl=slot_ttl
        )

    @property
    def on_owner_gone(self) -> OwnerGoneRecord | None:
        return self._reader.on_owner_gone

    @on_owner_gone.setter
    def on_owner_gone(self, record: OwnerGoneRecord | None) -> None:
        self._reader.on_owner_gone = record

    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: NumberedFrame
    ) -> None:
        """See `FrameOutbox.publish`: written, or waiting for a Redis that is away."""
        await self._outbox.publish(operator_id, turn_id, session_id, frame)

    @property
    def held(self) -> int:
        """Frames published and not written yet (while Redis is away, those waiting for it)."""
        return self._outbox.held

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None:
        """The operator's turn by id, or their latest one (in `session_id` if given)."""
        return await self._reader.locate(operator_id, session_id=session_id, turn_id=turn_id)

    def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[NumberedFrame | None]:
        """See `FrameReader.replay`."""
        return self._reader.replay(turn_id, after=after, heartbeat=heartbeat)

    async def relayed_turns(self) -> list[RelayedTurn]:
        """Every turn Redis holds frames of, with the session its first frame names (the
        turns of a stream whose first frame went are not listed)."""
        found = await first_frames(self._outbox.client, f"{PREFIX}frames:")
        turns = [(turn_id, NumberedFrame.stored(data).frame) for turn_id, data in found]
        return [
            RelayedTurn(turn_id, frame.session)
            for turn_id, frame in turns
            if isinstance(frame, StatusFrame) and frame.session is not None
        ]

    async def rewrite(self, turn_id: str, change: FramesChange) -> bool:
        """The turn's relayed frames written again as `change` gives them back, each under
        its stream id (bot.chat.relay_rewrites). Whether any changed."""

        def changed(stored: list[bytes]) -> list[bytes | None]:
            before = [NumberedFrame.stored(data) for data in stored]
            after = change(before)
            return [None if a is b else a.data for a, b in zip(after, before, strict=True)]

        return await rewrite_stream(self._outbox.client, f"{PREFIX}frames:{turn_id}", changed)

    def held_turns(self) -> list[RelayedTurn]:
        """The turns with frames waiting in this process to be written (Redis away)."""
        return self._outbox.held_turns()

    async def rewrite_held(self, turn_id: str, change: FramesChange) -> bool:
        """See `FrameOutbox.rewrite_held`."""
        return await self._outbox.rewrite_held(turn_id, change)

    async def close(self) -> None:
        """Write what waits (one more try if Redis is away: then it goes with the process),
        let the records of orphaned turns under way finish, disconnect."""
        await self._outbox.close()
        await self._reader.close()
