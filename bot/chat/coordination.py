"""Turn coordination across service instances: one turn per operator, stop from anywhere.

Without Redis a single process is the whole system and `LocalTurnLocks` is enough. With
Redis, the operator's turn slot is a key (`SET NX` with an expiry so a crashed instance frees
it) and a stop is published on a channel every instance listens to, so `POST .../stop` works
whichever instance the load balancer picked. A `forget that <words>` is published on a
second channel, heard by the same listener: every instance takes the words out of the turn
frames it holds in its own process (bot.chat.forgotten_frames). Pub/sub keeps nothing, so a
forget is also logged in a stream (`FORGET_LOG`) for as long as the relayed frames live
(their TTL, bot.chat.inflight.DEFAULT_LINGER_SECONDS): an instance whose listener was away
(Redis down, or reconnecting) reads the forgets it missed when it subscribes again, and
before its relay writes the frames it kept for a Redis that was away
(`RedisTurnLocks.catch_up_forgets`). The words stay in Redis no longer than the frames that
may hold them; a forget sent while Redis is away is sent again once it is back
(bot.chat.forget_delivery).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

import msgspec
import redis.asyncio as aioredis

from bot.redis_clients import CancellableRedis

log = logging.getLogger(__name__)
KEY_PREFIX = "steelframe:chat:turn:"
# The slot expires this long after its owner last renewed it (every third of it), so an
# instance that crashed mid-turn frees the operator within seconds, and a long turn that is
# alive never loses it.
SLOT_TTL_SECONDS = 30.0
STOP_CHANNEL = "steelframe:chat:stop"
FORGET_CHANNEL = "steelframe:chat:forget"
# The forgets of the last `forgets_kept` seconds (a key of the deployment's database): each
# entry a `ForgetSignal` as JSON under `s`.
FORGET_LOG = "steelframe:chat:forgets"
# A test's locks without a relay keep them as long as a deployment's frames live
# (bot.chat.inflight.DEFAULT_LINGER_SECONDS, which cannot be imported here: it imports us).
DEFAULT_FORGETS_KEPT_SECONDS = 120.0


def stop_channel(redis_db: int) -> str:
    """The stop channel of the deployment on Redis database `redis_db`: pub/sub channels are
    server-wide, not per database, and a stop for operator 1 of another deployment sharing
    the server must not stop ours."""
    return f"{STOP_CHANNEL}:{redis_db}"


class ForgetSignal(msgspec.Struct, frozen=True):
    """A `forget that <words>` run in `repo` (bot.chat.forgotten), told to every instance."""

    repo: str
    words: str


_FORGET_SIGNAL = msgspec.json.Decoder(ForgetSignal)


# A send refused the operator's slot while the turn holding it is being set up (its slot
# claimed, its session being placed: a read) waits this long at most for that, so that its
# 409 names the session to re-attach to, or, if that set-up is refused, takes the free slot
# instead of a 409 (`claim_slot`; bot.chat.inflight.TurnRegistry.settle within a process).
SET_UP_WAIT_SECONDS = 5.0
# How often a waiting send looks again (one Redis GET, or a database read, a look): the
# moments it waits through last milliseconds, a few looks each.
LOOK_AGAIN_SECONDS = 0.02


def slot_key(operator_id: int) -> str:
    """The operator's turn slot (its value: a `Slot`)."""
    return f"{KEY_PREFIX}{operator_id}"


class Slot(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the operator's slot holds (stored as JSON; the scripts below read `turn_id`):
    the turn holding it; its session ("" while not known: a send that names none is placed
    after the claim); its idempotency key's row key, when it was sent with one, so that a
    send with the same key through another instance, refused the slot, knows the turn
    holding it is the one its key names (bot.chat.key_joins); and whether it is still being
    set up (`placing`: claimed, not yet described)."""

    turn_id: str
    session: str = ""
    key: str | None = None
    placing: bool = False

    @property
    def session_id(self) -> str | None:
        return self.session or None


_SLOT = msgspec.json.Decoder(Slot)


def read_slot(raw: bytes | str | None) -> Slot | None:
    """A slot's stored value (None: no slot, or a value that is not a slot)."""
    if raw is None:
        return None
    try:
        return _SLOT.decode(raw)
    except msgspec.DecodeError:  # ValidationError included
        return None


def slot_held_by(raw: bytes | str | None, turn_id: str) -> bool:
    """Whether a slot's stored value (None: no slot) is held by `turn_id`; HELD_BY_LUA in
    Python, for a reader that looks without acting."""
    slot = read_slot(raw)
    return slot is not None and slot.turn_id == turn_id


# The slots' scripts act only on a slot its turn still holds (a slot taken over meanwhile
# is left): the turn id is compared with the stored value's in Redis, one round trip.
# (bot/chat/frames.py ends a turn whose owner is gone with it too.)
HELD_BY_LUA = """
local function held_by(key, turn_id)
  local value = redis.call('get', key)
  if not value then return false end
  local ok, slot = pcall(cjson.decode, value)
  return ok and type(slot) == 'table' and slot['turn_id'] == turn_id
end
"""
_RELEASE = (
    HELD_BY_LUA
    + """
if held_by(KEYS[1], ARGV[1]) then return redis.call('del', KEYS[1]) end
return 0
"""
)
# KEYS are slots, ARGV[1] the TTL in ms and ARGV[i + 1] the turn renewing KEYS[i].
_RENEW = (
    HELD_BY_LUA
    + """
local renewed = 0
for i, key in ipairs(KEYS) do
  if held_by(key, ARGV[i + 1]) then
    redis.call('pexpire', key, ARGV[1])
    renewed = renewed + 1
  end
end
return renewed
"""
)
# A forget logged and published in one round trip; the log keeps the forgets of the last
# ARGV[2] ms (entries older trimmed by their id's time, the key expiring with the newest).
# KEYS[1]: the log; ARGV: the signal, the time kept (ms), the channel.
_SIGNAL_FORGET = """
local id = redis.call('XADD', KEYS[1], '*', 's', ARGV[1])
local ms = tonumber(string.match(id, '^(%d+)'))
redis.call('XTRIM', KEYS[1], 'MINID', tostring(ms - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[1])
return id
"""
RENEW_BATCH = 1000  # slots renewed in one script call at most
StopHandler = Callable[[int], Awaitable[object]]
ForgetHandler = Callable[[ForgetSignal], Awaitable[object]]
T = TypeVar("T")
CONNECT_TIMEOUT = 3.0
LISTENER_RETRY_SECONDS = 1.0
LISTENER_MAX_RETRY_SECONDS = 60.0


class TurnLocks(Protocol):
    async def acquire(
        self,
        operator_id: int,
        turn_id: str,
        *,
        session_id: str | None = None,
        key: str | None = None,
    ) -> str | None:
        """Claim the slot for the turn (its session when the send named it; sent with
        `key`, the row key of its idempotency key), being set up; None on success, else the
        holder's turn id ("": it could not be read). `claim_slot` waits out a set-up."""

    async def describe(
        self, operator_id: int, turn_id: str, session_id: str, *, key: str | None = None
    ) -> None:
        """The turn holding the slot is set up: placed in `session_id`."""

    async def holder(self, operator_id: int) -> Slot | None: ...

    async def release(self, operator_id: int, turn_id: str) -> None: ...

    async def renew(self, operator_id: int, turn_id: str) -> None: ...

    def keep(self, operator_id: int, turn_id: str) -> AbstractContextManager[None]:
        """Keep the turn's slot renewed while the block runs."""

    @property
    def degraded(self) -> bool:
        """Whether the slots of other instances' turns cannot be read now (Redis away)."""

    async def signal_stop(self, operator_id: int) -> None: ...

    async def signal_forget(self, signal: ForgetSignal) -> bool:
        """Tell every instance (this one too) of a forget, now and to those listening later
        within the frames' lifetime; False when it could not (Redis away)."""

    async def run_listener(
        self, on_stop: StopHandler, on_forget: ForgetHandler | None = None
    ) -> None: ...

    async def close(self) -> None: ...


class LocalTurnLocks:
    """One process: the in-process registry already enforces everything."""

    async def acquire(
        self,
        operator_id: int,
        turn_id: str,
        *,
        session_id: str | None = None,
        key: str | None = None,
    ) -> str | None:
        return None

    async def describe(
        self, operator_id: int, turn_id: str, session_id: str, *, key: str | None = None
    ) -> None:
        return None

    async def holder(self, operator_id: int) -> Slot | None:
        return None

    async def release(self, operator_id: int, turn_id: str) -> None:
        return None

    async def renew(self, operator_id: int, turn_id: str) -> None:
        return None

    def keep(self, operator_id: int, turn_id: str) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    @property
    def degraded(self) -> bool:
        return False

    async def signal_stop(self, operator_id: int) -> None:
        return None

    async def signal_forget(self, signal: ForgetSignal) -> bool:
        return True  # the one process took the words out of its frames already

    async def run_listener(
        self, on_stop: StopHandler, on_forget: ForgetHandler | None = None
    ) -> None:
        return None

    async def close(self) -> None:
        return None


async def claim_slot(
    locks: TurnLocks,
    operator_id: int,
    turn_id: str,
    *,
    session_id: str | None = None,
    key: str | None = None,
    wait: float = SET_UP_WAIT_SECONDS,
) -> Slot | None:
    """Claim the operator's slot for the turn (`TurnLocks.acquire`): None when claimed, else
    the slot of the turn holding it. While that turn is still being set up (through another
    instance: within a process the registry waited already), wait for it, `wait` seconds at
    most, so the answer is the one its set-up leads to: set up, its slot names its session
    (a 409 the client can re-attach with); refused (a 400, a 404), its slot goes and this
    turn takes it, and is set up as the send asked (the same refusal, or a turn)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while True:
        taken = await locks.acquire(operator_id, turn_id, session_id=session_id, key=key)
        if taken is None:
            return None
        held = await locks.holder(operator_id)
        late = loop.time() >= deadline
        if held is None:  # it went between the two reads: claim it again
            if late:
                return Slot(taken)
            continue
        if not held.placing or late:
            return held
        await asyncio.sleep(LOOK_AGAIN_SECONDS)


class RedisTurnLocks:
    """The slot and stop signals in Redis; while Redis is unreachable, degraded to one
    process (the in-process registry still allows one turn per operator here): chat keeps
    answering, the outage and the recovery are logged once each, never every second."""

    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float = SLOT_TTL_SECONDS,
        forgets_kept: float = DEFAULT_FORGETS_KEPT_SECONDS,
    ) -> None:
        """`forgets_kept`: how long a forget stays in the log: the relayed frames' TTL (the
        composition passes the relay's linger)."""
        self.url = url
        # A blackholed host fails a connect in seconds, not after the OS's minutes.
        self._redis = CancellableRedis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT)
        self._ttl_ms = int(ttl_seconds * 1000)
        self._down = False
        self._release = self._redis.register_script(_RELEASE)
        self._renew = self._redis.register_script(_RENEW)
        self._signal_forget = self._redis.register_script(_SIGNAL_FORGET)
        self._forgets_kept_ms = int(forgets_kept * 1000)
        self._on_forget: ForgetHandler | None = None  # the listener's, once it runs
        self._forgets_seen = "-"  # the last entry of the log done here ("-": none)
        self._catching_up = asyncio.Lock()
        self._kept: dict[int, str] = {}  # operator -> the turn whose slot this process renews
        self._renewer: asyncio.Task[None] | None = None
        redis_db = int(self._redis.connection_pool.connection_kwargs.get("db") or 0)
        self.stop_channel = stop_channel(redis_db)
        self.forget_channel = f"{FORGET_CHANNEL}:{redis_db}"  # per deployment, as stops

    @property
    def degraded(self) -> bool:
        """True while Redis is unreachable and slots are held in this process only."""
        return self._down

    async def _call(self, what: str, fn: Callable[[], Awaitable[T]], fallback: T) -> T:
        try:
            result = await fn()
        except aioredis.RedisError as exc:
            self._went_down(what, exc)
            return fallback
        self._came_back()
        return result

    def _went_down(self, what: str, exc: Exception) -> None:
        if not self._down:
            self._down = True
            log.warning(
                "Redis unreachable (%s during %s): chat turn slots and stops work in this "
                "process only until it is back; check STEELFRAME_REDIS_URL",
                type(exc).__name__,
                what,
            )

    def _came_back(self) -> None:
        if self._down:
            self._down = False
            log.warning("Redis reachable again: chat turn slots are shared across instances")

    async def acquire(
        self,
        operator_id: int,
        turn_id: str,
        *,
        session_id: str | None = None,
        key: str | None = None,
    ) -> str | None:
        slot = Slot(turn_id, session_id or "", key, placing=True)
        return await self._call("acquire", lambda: self._acquire(operator_id, slot), None)

    async def _acquire(self, operator_id: int, slot: Slot) -> str | None:
        value = msgspec.json.encode(slot)
        for _ in range(2):  # the holder may finish between our SET and GET: try once more
            if await self._redis.set(slot_key(operator_id), value, nx=True, px=self._ttl_ms):
                return None
            held = read_slot(await self._redis.get(slot_key(operator_id)))
            if held is not None:
                return held.turn_id
        return ""

    async def describe(
        self, operator_id: int, turn_id: str, session_id: str, *, key: str | None = None
    ) -> None:
        value = msgspec.json.encode(Slot(turn_id, session_id, key))
        at = slot_key(operator_id)
        await self._call(
            "describe", lambda: self._redis.set(at, value, xx=True, px=self._ttl_ms), None
        )

    async def holder(self, operator_id: int) -> Slot | None:
        raw = await self._call("holder", lambda: self._redis.get(slot_key(operator_id)), None)
        return read_slot(raw)

    async def release(self, operator_id: int, turn_id: str) -> None:
        # With Redis unreachable the slot is left: its key expires by itself within the TTL.
        key = slot_key(operator_id)
        await self._call("release", lambda: self._release(keys=[key], args=[turn_id]), None)

    async def renew(self, operator_id: int, turn_id: str) -> None:
        await self._call("renew", lambda: self._renew_slots([(operator_id, turn_id)]), None)

    async def _renew_slots(self, slots: list[tuple[int, str]]) -> None:
        keys = [slot_key(operator_id) for operator_id, _ in slots]
        await self._renew(keys=keys, args=[self._ttl_ms, *(turn_id for _, turn_id in slots)])

    @contextlib.contextmanager
    def keep(self, operator_id: int, turn_id: str) -> Iterator[None]:
        """Keep the turn's slot renewed while the block runs. One task renews every slot
        this process keeps, a thousand to a script call, every third of the TTL (a task, a
        timer and two commands a renewal for each turn had cost 1,000 streaming turns about
        0.8 s of the loop's CPU in 30 s: bench/README.md, 1,000 chat streams)."""
        self._kept[operator_id] = turn_id
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.create_task(self._renew_kept(), name="chat-turn-slots")
        try:
            yield
        finally:
            if self._kept.get(operator_id) == turn_id:
                del self._kept[operator_id]

    async def _renew_kept(self) -> None:
        while self._kept:
            await asyncio.sleep(self._ttl_ms / 3000)
            kept = list(self._kept.items())
            for start in range(0, len(kept), RENEW_BATCH):
                chunk = kept[start : start + RENEW_BATCH]
                try:
                    await self._call("renew", functools.partial(self._renew_slots, chunk), None)
                except Exception:  # never the end of renewing: the slots would lapse
                    log.warning("renewing %d chat turn slots failed", len(chunk), exc_info=True)

    async def signal_stop(self, operator_id: int) -> None:
        # With Redis unreachable only a turn in this process can stop (the caller tried it).
        await self._call(
            "stop", lambda: self._redis.publish(self.stop_channel, str(operator_id)), None
        )

    async def signal_forget(self, signal: ForgetSignal) -> bool:
        # With Redis unreachable the other instances are not told now: the caller sends it
        # again once Redis is back (bot.chat.forget_delivery).
        message = msgspec.json.encode(signal)

        async def logged_and_published() -> bool:
            keys = [FORGET_LOG]
            await self._signal_forget(
                keys=keys, args=[message, self._forgets_kept_ms, self.forget_channel]
            )
            return True

        return await self._call("forget", logged_and_published, False)

    async def catch_up_forgets(self) -> None:
        """The forgets logged since the last this process read (`FORGET_LOG`), done here as
        the listener does those it hears, in order: the listener's on (re)subscribing, and
        the relay's before it writes frames that waited for Redis (bot.chat.frame_outbox),
        so those are written without the words. Nothing before the listener runs (a process
        starting holds no frames). Raises RedisError when Redis is away."""
        on_forget = self._on_forget
        if on_forget is None:
            return
        async with self._catching_up:
            start = "-" if self._forgets_seen == "-" else f"({self._forgets_seen}"
            # redis-py types an entry loosely: (id, {field: value}) as bytes here.
            entries: list[tuple[bytes, dict[bytes, bytes]]] = await self._redis.xrange(
                FORGET_LOG, min=start
            )  # type: ignore[assignment]
            for entry_id, fields in entries:
                raw = fields.get(b"s")
                if raw is not None:
                    await self._forget_here(on_forget, raw)
                self._forgets_seen = entry_id.decode()

    async def run_listener(
        self, on_stop: StopHandler, on_forget: ForgetHandler | None = None
    ) -> None:
        """Until cancelled: call `on_stop(operator_id)` for each stop any instance publishes,
        and `on_forget` for each forget. Reconnects after a Redis outage, backing off up to a
        minute, so stops keep working once it is back; the outage is logged once, not on
        every attempt."""
        delay = LISTENER_RETRY_SECONDS
        self._on_forget = on_forget
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.subscribe(self.stop_channel, self.forget_channel)
                # Subscribed first: a forget logged from here on is heard too (twice is
                # harmless: the second finds nothing to take out).
                await self.catch_up_forgets()
                self._came_back()
                delay = LISTENER_RETRY_SECONDS
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        # redis-py's message is a dict: its channel and data, typed here.
                        channel = message.get("channel")
                        heard = channel.decode() if isinstance(channel, bytes) else str(channel)
                        await self._heard(heard, message["data"], on_stop, on_forget)
            except aioredis.RedisError as exc:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    # redis-py can turn the cancel that arrives mid-read into a connection
                    # error; retrying would swallow the cancel and never stop.
                    raise asyncio.CancelledError from exc
                self._went_down("the stop listener", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, LISTENER_MAX_RETRY_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def _heard(
        self, channel: str, data: bytes, on_stop: StopHandler, on_forget: ForgetHandler | None
    ) -> None:
        if channel != self.forget_channel:
            with contextlib.suppress(ValueError):
                await on_stop(int(data))
            return
        if on_forget is not None:
            await self._forget_here(on_forget, data)

    @staticmethod
    async def _forget_here(on_forget: ForgetHandler, data: bytes) -> None:
        try:
            await on_forget(_FORGET_SIGNAL.decode(data))
        except Exception as exc:  # a forget not done here costs a line, never the listener
            log.warning("a forget heard from another instance was not done here (%r)", exc)

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        await self._redis.aclose()
