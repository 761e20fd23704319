"""Installations removed, told to every process. One serve process handles the uninstall
(or a repository taken from an installation), but every process's GitHub client caches
which installation serves a repository for an hour (`app_auth.InstallationLookup`): the
others went on using the removed installation until their answer expired. The handler
appends each repository to a Redis stream (`InstallationRemovals.removed`); each process's
lookup (`SharedInstallationLookup`) reads what was appended since it last looked before it
answers, and forgets those repositories, so its next answer comes from the store or GitHub.

A suspended installation is told the same way (entries marked `suspended`): a lookup
refuses it (GitHubNotFound, as an uninstalled one) until told it was unsuspended. A process
that starts while an installation is suspended never reads that entry (it reads from the
stream's end); GitHub's own answer refuses it there (`suspended_at` is set:
`GitHubClient._fetch_installation` raises `suspended`, and nothing is cached).

A stream rather than pub/sub: a process that was busy or reconnecting reads what it missed
from where it stopped; nothing is lost between two lookups. A process whose first read
fails (Redis down as it starts) reads, once Redis answers, from a minute before that
failure (CLOCK_SKEW_SECONDS), so the removals told during the outage reach it too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import cast

import redis

from bot.github.app_auth import INSTALLATION_LOOKUP_TTL_SECONDS, EpochClock, InstallationLookup
from bot.github.errors import GitHubNotFound

log = logging.getLogger(__name__)
# A stream entry as redis-py reads it (a client without `decode_responses`).
Entries = list[tuple[bytes, dict[bytes, bytes]]]
# Entries kept (trimmed approximately): far more removals than an hour holds, and an entry
# older than an hour names nothing any cache still holds (INSTALLATION_LOOKUP_TTL_SECONDS).
MAX_REMOVALS = 10_000
START = "0-0"  # before every stream entry
# After Redis failed to answer, lookups answer from the cache without trying it again for
# this long: an unreachable Redis costs one connect timeout (redis-py: 5 s) a window, not
# one per GitHub call. Nothing is missed meanwhile: the next read starts where the last
# one stopped.
REMOVALS_RETRY_SECONDS = 15.0
# A lookup whose first read of the stream failed has no position in it: it reads, once Redis
# answers, from the stream entries of this long before that failure (entry ids are Redis's
# clock in milliseconds; this much covers a skew between the hosts' clocks). An earlier
# removal read that way costs one fresh lookup, never a wrong answer.
CLOCK_SKEW_SECONDS = 60.0


def removals_key(app_id: int) -> str:
    return f"steelframe:{app_id}:installation-removals"


class InstallationRemovals:
    """The stream of repositories whose installation went away, for one App."""

    def __init__(self, connection: redis.Redis, *, app_id: int) -> None:
        self.connection = connection
        self.key = removals_key(app_id)

    def removed(
        self, repos: Iterable[str], installation_id: int, *, suspended: bool | None = None
    ) -> None:
        """Tell every process that `installation_id` no longer serves `repos`; `suspended`:
        it was suspended (True: it serves nothing until told False, on `unsuspend`)."""
        names = sorted({repo.lower() for repo in repos})
        if not names:
            return
        with self.connection.pipeline(transaction=False) as pipe:
            for name in names:
                entry = {"repo": name, "installation": str(installation_id)}
                if suspended is not None:
                    entry["suspended"] = "1" if suspended else "0"
                pipe.xadd(self.key, entry, maxlen=MAX_REMOVALS, approximate=True)  # type: ignore[arg-type]
            pipe.execute()

    def latest(self) -> str:
        """The id of the newest entry (START when there is none): where a new reader starts."""
        newest = cast(Entries, self.connection.xrevrange(self.key, count=1))
        return _text(newest[0][0]) if newest else START

    def since(self, last: str) -> tuple[str, list[Removal]]:
        """The removals appended after entry `last`, and the id to read from next."""
        entries = cast(Entries, self.connection.xrange(self.key, min=f"({last}"))
        found = [_removal(fields) for _, fields in entries]
        return (_text(entries[-1][0]) if entries else last), [r for r in found if r.repo]


@dataclass(frozen=True)
class Removal:
    """One stream entry: the repository, its installation, and whether it was suspended
    (True), unsuspended (False) or removed (None)."""

    repo: str
    installation: int
    suspended: bool | None = None


def _removal(fields: dict[bytes, bytes]) -> Removal:
    flag = fields.get(b"suspended")
    installation = _text(fields.get(b"installation", b"0"))
    return Removal(
        repo=_text(fields.get(b"repo", b"")),
        installation=int(installation) if installation.isdigit() else 0,
        suspended=None if flag is None else flag == b"1",
    )


class SharedInstallationLookup(InstallationLookup):
    """`InstallationLookup` that, before each answer, forgets the repositories another
    process was told are no longer served (`InstallationRemovals`). Redis unreachable: the
    cache answers as an unshared one would (until its entries expire), with one warning,
    and Redis is tried again once REMOVALS_RETRY_SECONDS have passed."""

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
        self._suspended: set[int] = set()  # installations told suspended since
        self._unread_until: float | None = None  # Redis failed: not tried again before then

    async def get(self, repo: str) -> int:
        await self._catch_up()
        installation_id = await super().get(repo)
        if installation_id in self._suspended:
            self.forget(repo)
            raise suspended(installation_id)
        return installation_id

    async def _catch_up(self) -> None:
        if self._unread_until is not None and self._clock() < self._unread_until:
            return
        try:
            if self._read_to is None:
                # Nothing cached yet: what was removed before now concerns no answer here.
                self._read_to = await asyncio.to_thread(self._removals.latest)
                found: list[Removal] = []
            else:
                self._read_to, found = await asyncio.to_thread(self._removals.since, self._read_to)
        except redis.RedisError as exc:
            if self._read_to is None:
                # Answers cached from now on must hear of removals told during the outage.
                self._read_to = entry_id_at(self._clock() - CLOCK_SKEW_SECONDS)
            if self._unread_until is None:
                log.warning(
                    "installation lookup: removals not read (%s); cached answers kept, "
                    "Redis tried again every %.0f s",
                    exc,
                    REMOVALS_RETRY_SECONDS,
                )
            self._unread_until = self._clock() + REMOVALS_RETRY_SECONDS
            return
        if self._unread_until is not None:
            log.info("installation lookup: removals read again")
            self._unread_until = None
        for removal in found:
            self.forget(removal.repo)
            if removal.suspended:
                self._suspended.add(removal.installation)
            elif removal.suspended is False:
                self._suspended.discard(removal.installation)

    def forget(self, repo: str) -> None:
        """Drop the cached answer for `repo` (the store, which the uninstall updated, or
        GitHub answers next); unlike `invalidate`, the stored answer stays trusted."""
        self._known.pop(repo.lower(), None)


def suspended(installation_id: int) -> GitHubNotFound:
    """The refusal of a suspended installation: GitHub still names it for the repository
    (with its `suspended_at`), but it serves nothing, so it is refused as an uninstalled one
    is."""
    return GitHubNotFound(f"the App's installation {installation_id} is suspended")


def entry_id_at(epoch_seconds: float) -> str:
    """The id a stream entry appended at that time would have at the least (`<ms>-0`)."""
    return f"{max(0, int(epoch_seconds * 1000))}-0"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
