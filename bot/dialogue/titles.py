"""Session titles: from the operator's first message, at most 60 characters."""

from __future__ import annotations

TITLE_LIMIT = 60
ISSUE_TITLE_LIMIT = 250
# What a request's wording leaves before the real title: "file an issue: fix it" -> "fix it".
_LEADING_PUNCTUATION = " \t:;,.!?-–—>*\"'`"


def issue_title(text: str, limit: int = ISSUE_TITLE_LIMIT) -> str:
    """A GitHub issue title: one line, never starting with punctuation, at most `limit`."""
    return " ".join(text.split()).lstrip(_LEADING_PUNCTUATION)[:limit].rstrip()


def title_from_message(message: str, limit: int = TITLE_LIMIT) -> str:
    """The message on one line, cut on a word boundary to fit `limit` (with an ellipsis)."""
    flat = " ".join(message.split())
    if len(flat) <= limit:
        return flat
    room = limit - 1  # leave space for the ellipsis
    cut = flat[: room + 1].rsplit(" ", 1)[0] if " " in flat[: room + 1] else flat[:room]
    cut = cut[:room].rstrip(" ,.;:-")
    return f"{cut}…"
