"""The words a `forget that <words>` names, as they may be written, and what stands in their
place once they are taken out (bot.chat.forgotten)."""

from __future__ import annotations

import re
from typing import Any, TypeVar

FORGOTTEN = "[forgotten]"
_JSON_ESCAPED = frozenset('"\\')

T = TypeVar("T")


class Words:
    """The words as they may be written: case aside, any run of whitespace between them
    (memory matches the same words in its chunks, bot.chat.operator_commands)."""

    def __init__(self, words: str) -> None:
        parts = words.split()
        if not parts:
            raise ValueError("no words to forget")
        self.pattern = re.compile(r"\s+".join(re.escape(part) for part in parts), re.I)
        # The longest word, lowercased: the database narrows the rows by it (LIKE).
        longest = max(parts, key=len).lower()
        self.like = (
            "%" + longest.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        )
        # JSON as stored writes that word as it is (no escapes): LIKE may narrow JSON rows.
        self.like_in_json = (
            longest.isascii() and longest.isprintable() and not (_JSON_ESCAPED & set(longest))
        )

    def said_in(self, text: str | None) -> bool:
        return text is not None and self.pattern.search(text) is not None

    def out_of(self, value: T) -> T:
        """`value` with the words replaced by FORGOTTEN: a string, or every string inside a
        JSON value (a message's metadata: retrieved previews, notes, the held proposal)."""
        found: Any = value
        if isinstance(found, str):
            found = self.pattern.sub(FORGOTTEN, found)
        elif isinstance(found, list):
            found = [self.out_of(item) for item in found]
        elif isinstance(found, dict):
            found = {key: self.out_of(item) for key, item in found.items()}
        return found  # type: ignore[no-any-return]


def said_as(kept: str, message: str) -> bool:
    """`message` is `kept` as it was before a forget took words out of it: the same text
    where `kept` has no FORGOTTEN, any (non-empty) text where it has. The words themselves
    are kept nowhere to compare with, so any words in their place match."""
    if FORGOTTEN not in kept:
        return kept == message
    parts = (re.escape(part) for part in kept.split(FORGOTTEN))
    return re.fullmatch(r"[\s\S]+?".join(parts), message) is not None
