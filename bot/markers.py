"""Steelframe's own HTML-comment markers (`<!-- steelframe-filing:... -->`, publish,
decision, progress, notice): how to recognise them, and how to keep them out of memory and
out of what the operator reads. They are for Steelframe's reconciling, never content."""

from __future__ import annotations

import re

_MARKER = re.compile(r"<!--\s*steelframe[^>]*?-->", re.IGNORECASE | re.DOTALL)
# Comments Steelframe writes about its own work (the sticky progress comment, notices):
# the task's state says the same, so they are not memory of the project.
_STATUS_COMMENT = re.compile(r"<!--\s*steelframe-(?:progress|notice)\b", re.IGNORECASE)
# How Steelframe lays one out: its marker first (bot.lifecycle.progress.progress_body and
# notice_body).
_STATUS_OPENING = re.compile(r"\s*<!--\s*steelframe-(?:progress|notice)\b", re.IGNORECASE)


def without_markers(text: str) -> str:
    return _MARKER.sub("", text)


def is_status_comment(text: str) -> bool:
    return bool(_STATUS_COMMENT.search(text))


def opens_as_status(text: str) -> bool:
    """Whether the text is laid out as Steelframe's status comment (progress, notice): its
    marker first. Steelframe's own only when the App wrote it, which the caller checks:
    anyone can type a marker (task ids are sequential), and a comment that merely quotes
    one (a Decision citing a notice) is not laid out as one."""
    return _STATUS_OPENING.match(text) is not None
