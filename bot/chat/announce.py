"""Session changes on the operator's events stream, said by the turn pipeline and the
session service alike."""

from __future__ import annotations

import asyncio

from bot.events import OperatorEvents, SessionChange


async def announce(
    events: OperatorEvents | None, operator_id: int, session_id: str, change: SessionChange
) -> None:
    """Tell the operator's clients a session changed (never fails the caller)."""
    if events is not None:
        await asyncio.to_thread(events.session_changed, operator_id, session_id, change)
