"""Installations removed, told to every process. One serve process handles the uninstall
(or a repository taken from an installation), but every process's GitHub client caches
which installation serves a repository for an hour (`app_auth.InstallationLookup`): the
others went on using the removed installation until their answer expired. The handler
appends each repository to a Redis stream (`InstallationRemovals.removed`); each process's
lookup (`SharedInstallationLookup`) reads what was appended since it last looked before it
answers, and forgets those repositories, so its next answer comes from the store or GitHub.

A stream rather than pub/sub: a process that was busy or reconnecting reads what it missed
from where it stopped; nothing is lost between two lookups.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import cast

import redis

from bot.github.app_auth import INSTALLATION_LOOKUP_TTL_SECONDS, EpochClock, InstallationLookup

log = logging.getLogger(__name__)
# A stream entry as redis-py reads it (a client without `decode_responses`).
Entries = list[tuple[bytes, dict[bytes, bytes]]]
# Entries kept (trimmed approximately): far more removals than an hour holds, and an entry
# older than an hour names nothing any cache still holds (INSTALLATION_LOOKUP_TTL_SECONDS).
MAX_REMOVALS = 10_000
START = "0-0"  # before every stream entry


def removals_key(app_id: int) -> str:
    return f"steelframe:{app_id}:installation-removals"


class InstallationRemovals:
    """The stream of repositories whose installation went away, for one App."""

    def __init__(self, connection: redis.Redis, *, app_id: int) -> None:
        self.connection = connection
        self.key = removals_key(app_id)

    def removed(self, repos: Iterable[str], installation_id: int) -> None:
        """Tell every process that `installation_id` no longer serves `repos`."""
        names = sorted({repo.lower() for repo in repos})
        if not names:
            return
        with self.connection.pipeline(transaction=False) as pipe:
            for name in names:
                entry = {"repo": name, "installation": str(installation_id)}
                pipe.xadd(self.key, entry, maxlen=MAX_REMOVALS, approximate=True)  # type: ignore[arg-type]
            pipe.execute()

    def latest(self) -> str:
        """The id of the newest entry (START when there is none): where a new reader starts."""
        newest = cast(Entries, self.connection.xrevrange(self.key, count=1))
        return _text(newest[0][0]) if newest else START

    def since(self, last: str) -> tuple[str, list[str]]:
        """The repositories appended after entry `last`, and the id to read from next."""
        entries = cast(Entries, self.connection.xrange(self.key, min=f"({last}"))
        repos = [_text(fields.get(b"repo", b"")) for _, fields in entries]
        return (_text(entries[-1][0]) if entries else last), [r for r in repos if r]


class SharedInstallationLookup(InstallationLookup):
    """`InstallationLookup` that, before each answer, forgets the repositories another
    process was told are no longer served (`InstallationRemovals`). Redis unreachable: the
    cache answers as an unshared one would (until its entries expire), with a warning."""

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[int]],
        *,
        removals: InstallationRemovals,
        clock: EpochClock,
        ttl: float = INSTALLATION_LOOKUP_TTL_SECONDS,
        durable: Callable[[str], Awaitable[int | None]] | None = None,
    ) -> None:
        super().__init__(fetch, clock=clock, ttl=ttl, durable=durable)
        self._removals = removals
        self._read_to: str | None = None  # the stream entry read last; None: not yet

    async def get(self, repo: str) -> int:
        await self._catch_up()
        return await super().get(repo)

    async def _catch_up(self) -> None:
        try:
            if self._read_to is None:
                # Nothing cached yet: what was removed before now concerns no answer here.
                self._read_to = await asyncio.to_thread(self._removals.latest)
                return
            self._read_to, repos = await asyncio.to_thread(self._removals.since, self._read_to)
        except redis.RedisError as exc:
            log.warning("installation lookup: removals not read (%s); cached answers kept", exc)
            return
        for repo in repos:
            self.forget(repo)

    def forget(self, repo: str) -> None:
        """Drop the cached answer for `repo` (the store, which the uninstall updated, or
        GitHub answers next); unlike `invalidate`, the stored answer stays trusted."""
        self._known.pop(repo.lower(), None)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
