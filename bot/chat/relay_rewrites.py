"""Relayed turn frames changed in place (bot.chat.frames keeps them in one Redis stream per
turn, and reads them: this module sees bytes): which turns Redis holds, and a turn's frames
written again, each under its own stream id, so a reader part way through reads on from
where it was. What a `forget that
<words>` takes out of the frames (bot.chat.forgotten_frames) goes through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SCAN_COUNT = 500
# The stream written again with the entries given replaced, in one step (a reader never
# finds it half written or gone), keeping its ids and what is left of its expiry; entries
# added since they were read stay as they are. A stream gone or without an expiry (not
# one of ours) is left. KEYS[1]: the stream; ARGV: id, frame, id, frame, ...
_REWRITE = """
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
if #entries == 0 then return 0 end
local new = {}
for i = 1, #ARGV, 2 do new[ARGV[i]] = ARGV[i + 1] end
redis.call('DEL', KEYS[1])
for _, entry in ipairs(entries) do
  redis.call('XADD', KEYS[1], entry[1], 'f', new[entry[1]] or entry[2][2])
end
redis.call('PEXPIRE', KEYS[1], ttl)
return #entries
"""


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
    """The stream's frames as `change` gives them back (None: left as it is). Whether any
    changed."""
    entries = await redis.xrange(stream)
    after = change([fields[b"f"] for _, fields in entries])
    changed: list[bytes] = []
    for (entry_id, _), data in zip(entries, after, strict=True):
        if data is not None:
            changed += [entry_id, data]
    if not changed:
        return False
    await redis.eval(_REWRITE, 1, stream, *changed)
    return True
