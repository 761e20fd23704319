"""Steelframe's own HTML-comment markers (`<!-- steelframe-filing:... -->`, publish,
decision, progress, notice): how to recognise them, and how to keep them out of memory and
out of what the operator reads. They are for Steelframe's reconciling, never content."""

from __future__ import annotations

import re

_MARKER = re.compile(r"<!--\s*steelframe[^>]*?-->", re.IGNORECASE | re.DOTALL)
# Comments Steelframe writes about its own work (the sticky progress comment, notices):
# the task's state says the same, so they are not memory of the project.
_STATUS_COMMENT = re.compile(r"<!--\s*steelframe-(?:progress|notice)\b", re.IGNORECASE)


def without_markers(text: str) -> str:
    return _MARKER.sub("", text)


def is_status_comment(text: str) -> bool:
    return bool(_STATUS_COMMENT.search(text))
