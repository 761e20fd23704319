"""Relayed turn frames changed in place (bot.chat.frames keeps them in one Redis stream per
turn, and reads them: this module sees bytes): which turns Redis holds, and a turn's frames
written again, each under its own stream id, so a reader part way through reads on from
where it was. What a `forget that
<words>` takes out of the frames (bot.chat.forgotten_frames) goes through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

SCAN_COUNT = 500
# Tries of one rewrite whose stream keeps changing under it (another rewrite each time).
REWRITE_TRIES = 10
# The stream written again with the entries given replaced, in one step (a reader never
# finds it half written or gone), keeping its ids and what is left of its expiry; entries
# added since they were read stay as they are. Only if each entry to replace still holds
# what it held when read (-1 otherwise, nothing written): another rewrite (a forget of
# other words, on another instance) that wrote between this one's read and its write would
# otherwise get its words put back. A stream gone or without an expiry (not one of ours)
# is left. KEYS[1]: the stream; ARGV: id, frame as read, new frame, id, ...
_REWRITE = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
if #entries == 0 then return 0 end
local was, new = {}, {}
for i = 1, #ARGV, 3 do
  was[ARGV[i]] = ARGV[i + 1]
  new[ARGV[i]] = ARGV[i + 2]
end
for _, entry in ipairs(entries) do
  if was[entry[1]] ~= nil and was[entry[1]] ~= entry[2][2] then return -1 end
end
redis.call('DEL', KEYS[1])
for _, entry in ipairs(entries) do
  redis.call('XADD', KEYS[1], entry[1], 'f', new[entry[1]] or entry[2][2])
end
redis.call('PEXPIRE', KEYS[1], ttl)
return #entries
"""


class RewriteContended(RedisError):
    """The stream changed under each of REWRITE_TRIES rewrites: not written (a Redis
    failure to its callers, which log it)."""


async def first_frames(redis: Any, prefix: str) -> list[tuple[str, bytes]]:
    """Each stream under `prefix` (a turn's frames), by its name's rest (the turn id),
    with its first entry's frame (an empty stream is not listed)."""
    found = []
    async for key in redis.scan_iter(match=f"{prefix}*", count=SCAN_COUNT, _type="stream"):
        name = key.decode() if isinstance(key, bytes) else str(key)
        first = await redis.xrange(name, count=1)
        if first:
            found.append((name.removeprefix(prefix), first[0][1][b"f"]))
    return found


async def rewrite_stream(
    redis: Any, stream: str, change: Callable[[list[bytes]], list[bytes | None]]
) -> bool:
    """The stream's frames as `change` gives them back (None: left as it is), `change`
    asked again of what the stream holds then if another rewrite wrote first. Whether any
    changed."""
    for _ in range(REWRITE_TRIES):
        entries = await redis.xrange(stream)
        after = change([fields[b"f"] for _, fields in entries])
        changed: list[bytes] = []
        for (entry_id, fields), data in zip(entries, after, strict=True):
            if data is not None:
                changed += [entry_id, fields[b"f"], data]
        if not changed:
            return False
        if await redis.eval(_REWRITE, 1, stream, *changed) != -1:
            return True
    raise RewriteContended(f"{stream} changed under {REWRITE_TRIES} rewrites")
