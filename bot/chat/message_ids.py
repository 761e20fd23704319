"""A stored message's id says which turn wrote it: the turn's id with `-u` (the operator's
message) or `-a` (the reply). A turn is stored once, both messages together, so these ids
tell whether a turn is stored (a killed turn's note is not written twice; a session read
does not name a turn it already holds as still running)."""

from __future__ import annotations

from collections.abc import Iterable

ASKED = "-u"
ANSWERED = "-a"


def asked_id(turn_id: str) -> str:
    """The id of the turn's operator message."""
    return f"{turn_id}{ASKED}"


def answered_id(turn_id: str) -> str:
    """The id of the turn's reply."""
    return f"{turn_id}{ANSWERED}"


def is_reply(message_id: str) -> bool:
    return message_id.endswith(ANSWERED)


def turn_of(message_id: str) -> str:
    """The turn a message belongs to: its id without the ending."""
    return message_id.rsplit("-", 1)[0]


def holds_turn(message_ids: Iterable[str], turn_id: str) -> bool:
    """Whether the turn's messages are among these (stored together, so its reply)."""
    return answered_id(turn_id) in message_ids
