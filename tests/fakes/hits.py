"""A retrieval hit built from the few fields a test cares about (the rest at neutral
values), decoded as the wire would decode it, so a wrong field name or type fails."""

from __future__ import annotations

import msgspec

from bot.contracts.hits import RetrievedHit

NEUTRAL: dict[str, object] = {
    "source": "comment",
    "score": 0.0,
    "coverage": 1.0,
    "repo": "steelframe-dev/sandbox",
    "issue": None,
    "session_id": None,
    "paths": [],
    "created_at": None,
    "links": [],
    "preview": "",
    "text": "",
    "round": "message",
}


def retrieved_hit(**fields: object) -> RetrievedHit:
    return msgspec.convert({**NEUTRAL, **fields}, RetrievedHit)
