"""Turn frames across instances: with Redis, every frame a turn emits is also appended to a
Redis stream of that turn, so `GET .../chat/stream` with `Last-Event-ID` resumes on any
instance behind the load balancer, not only on the one running the turn.

Keys (all expire `linger` seconds after the turn's last frame):
- `steelframe:chat:frames:{turn_id}`: the stream; one entry per frame, field `f` = JSON.
- `steelframe:chat:latest:{operator_id}`: {turn_id, session_id} of the operator's latest turn.
- `steelframe:chat:turn:{turn_id}:operator`: whose turn it is (a turn id names one operator).

Publishing never fails a turn: a Redis outage is logged once (and its end once), and the
turn goes on, resumable on its own instance as before. Finding another instance's turn while
Redis is unreachable is a 503 naming the setting, never a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from redis.exceptions import RedisError

from bot.errors import Unavailable
from bot.redis_clients import DEFAULT_LONGEST_BLOCK, blocking_reader, xread_entries

log = logging.getLogger(__name__)
PREFIX = "steelframe:chat:"
MAX_FRAMES = 50_000  # a turn longer than this keeps its newest frames (XADD MAXLEN ~)
TERMINAL_TYPES = frozenset({"done", "error"})
Frame = dict[str, Any]


@dataclass(frozen=True)
class RelayedTurn:
    turn_id: str
    session_id: str


class FrameRelay(Protocol):
    async def publish(
        self, operator_id: int, turn_id: str, session_id: str, frame: Frame
    ) -> None: ...

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None: ...

    def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[Frame | None]: ...

    async def close(self) -> None: ...


class RedisFrameRelay:
    def __init__(
        self, url: str, *, linger: float, longest_block: float = DEFAULT_LONGEST_BLOCK
    ) -> None:
        self._redis = blocking_reader(url, longest_block=longest_block)
        self._linger_ms = int(linger * 1000)
        self._down = False  # publishing failed since the last success (logged once)

    async def publish(self, operator_id: int, turn_id: str, session_id: str, frame: Frame) -> None:
        stream = f"{PREFIX}frames:{turn_id}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.xadd(stream, {"f": json.dumps(frame)}, maxlen=MAX_FRAMES, approximate=True)
                pipe.pexpire(stream, self._linger_ms)
                if frame.get("type") == "status" or frame.get("type") in TERMINAL_TYPES:
                    # Cheap enough on these (one or two a turn and round): keep the lookups
                    # alive as long as the stream, whatever frame comes first or last.
                    latest = json.dumps({"turn_id": turn_id, "session_id": session_id})
                    pipe.set(f"{PREFIX}latest:{operator_id}", latest, px=self._linger_ms)
                    pipe.set(f"{PREFIX}turn:{turn_id}:operator", operator_id, px=self._linger_ms)
                await pipe.execute()
        except RedisError as exc:
            if not self._down:
                self._down = True
                log.warning(
                    "turn %s: frames not relayed through Redis until it is back (%s); turns "
                    "resume only on the instance running them",
                    turn_id,
                    type(exc).__name__,
                )
            return
        if self._down:
            self._down = False
            log.warning("frames are relayed through Redis again")

    async def locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None:
        """The operator's turn by id, or their latest one (in `session_id` if given)."""
        try:
            return await self._locate(operator_id, session_id=session_id, turn_id=turn_id)
        except RedisError as exc:
            raise Unavailable(
                "turns running on other instances cannot be found while Redis is "
                "unreachable; check STEELFRAME_REDIS_URL",
                detail={"reason": type(exc).__name__},
            ) from exc

    async def _locate(
        self, operator_id: int, *, session_id: str | None, turn_id: str | None
    ) -> RelayedTurn | None:
        if turn_id is not None:
            owner = await self._redis.get(f"{PREFIX}turn:{turn_id}:operator")
            if owner is None or int(owner) != operator_id:
                return None
            raw = await self._redis.get(f"{PREFIX}latest:{operator_id}")
            latest = json.loads(raw) if raw else {}
            return RelayedTurn(turn_id, str(latest.get("session_id") or session_id or ""))
        raw = await self._redis.get(f"{PREFIX}latest:{operator_id}")
        if raw is None:
            return None
        latest = json.loads(raw)
        if session_id is not None and latest["session_id"] != session_id:
            return None
        return RelayedTurn(str(latest["turn_id"]), str(latest["session_id"]))

    async def replay(
        self, turn_id: str, *, after: int, heartbeat: float | None
    ) -> AsyncIterator[Frame | None]:
        """Frames with id > `after`, then live ones until the terminal frame; None after
        `heartbeat` seconds without one. Ends if the stream expires unfinished (the instance
        running the turn died and nothing more will come)."""
        stream = f"{PREFIX}frames:{turn_id}"
        position = "0-0"
        block = int((heartbeat or DEFAULT_LONGEST_BLOCK) * 1000)
        while True:
            answer: Any = await self._redis.xread({stream: position}, block=block, count=500)
            entries = xread_entries(answer)  # (entry id, {b"f": frame JSON})
            if not entries:
                if not await self._redis.exists(stream):
                    return
                yield None
                continue
            for entry_id, fields in entries:
                position = entry_id
                frame = json.loads(fields[b"f"])
                if frame["id"] <= after:
                    continue
                yield frame
                if frame.get("type") in TERMINAL_TYPES:
                    return

    async def close(self) -> None:
        await self._redis.aclose()
