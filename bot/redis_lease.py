"""A lease in Redis: one holder at a time across processes and machines.

`SET key token NX PX ttl` takes it; only the holder (who knows the token) renews or
releases it, each a compare-and-act Lua script. A holder that dies stops renewing and the
lease lapses after `ttl` seconds, so a crash never blocks the others for longer. `held()`
renews from a thread every ttl/3 while the caller works.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis

log = logging.getLogger(__name__)

RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisLease:
    def __init__(self, client: redis.Redis, name: str, *, ttl: float) -> None:
        self.name = name
        self.ttl = ttl
        self.token = uuid.uuid4().hex
        self._redis = client
        self._renew = client.register_script(RENEW)
        self._release = client.register_script(RELEASE)

    @property
    def _ttl_ms(self) -> int:
        return max(int(self.ttl * 1000), 1)

    def acquire(self) -> bool:
        return bool(self._redis.set(self.name, self.token, nx=True, px=self._ttl_ms))

    def renew(self) -> bool:
        """Extend the lease; False if it lapsed and someone else (or nobody) holds it."""
        return bool(self._renew(keys=[self.name], args=[self.token, self._ttl_ms]))

    def release(self) -> None:
        self._release(keys=[self.name], args=[self.token])

    def holder(self) -> str | None:
        value = self._redis.get(self.name)
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)


@contextmanager
def held(client: redis.Redis, name: str, *, ttl: float) -> Iterator[bool]:
    """Yields True while this process holds the lease `name` (renewed in the background
    until the block ends, then released), False at once if another holder has it."""
    lease = RedisLease(client, name, ttl=ttl)
    if not lease.acquire():
        yield False
        return
    stop = threading.Event()

    def keep() -> None:
        while not stop.wait(ttl / 3):
            try:
                if not lease.renew():
                    log.warning("lease %s lapsed while held (the work overran it)", name)
                    return
            except redis.RedisError as exc:
                log.warning("lease %s not renewed: %s", name, exc)

    renewer = threading.Thread(target=keep, name=f"lease:{name}", daemon=True)
    renewer.start()
    try:
        yield True
    finally:
        stop.set()
        renewer.join()
        try:
            lease.release()
        except redis.RedisError as exc:  # it lapses by itself within ttl
            log.warning("lease %s not released: %s", name, exc)
