"""What the sidebar calls a session: its subject, not the operator's request wording.

A session's stored title is its first message ("file an issue for the flaky login test"),
so every filing chat used to read "file an issue for the…". The label is, in order: what a
filing or memory request named (the filed issue's title: "Flaky login test"), the stored
title when it is not a request, else the first sentence of the session's summary, else
"New chat". The stored title is left as it is (it is the operator's words)."""

from __future__ import annotations

import re

from bot.dialogue.phrasing import filing_request, memory_request
from bot.dialogue.titles import TITLE_LIMIT, title_from_message

EMPTY_LABEL = "New chat"
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def session_label(title: str | None, summary: str | None) -> str:
    if title:
        subject = _subject(title)
        if subject.strip("… "):
            return subject
        if filing_request(title) is None and memory_request(title) is None:
            return title
    if summary and summary.strip():
        return title_from_message(_SENTENCE_END.split(summary.strip(), maxsplit=1)[0])
    return title or EMPTY_LABEL


def _subject(title: str) -> str:
    """What a request asked to file or remember, as a title ("" when it is no request or
    names nothing: "file this as an issue")."""
    filed = filing_request(title)
    if filed:
        return _as_title(filed)
    fact = memory_request(title)
    if fact:
        return f"Remember: {_as_title(fact)}"
    return ""


def _as_title(words: str) -> str:
    text = _ARTICLE.sub("", " ".join(words.split())).strip()
    return title_from_message(text[:1].upper() + text[1:], TITLE_LIMIT) if text else ""
