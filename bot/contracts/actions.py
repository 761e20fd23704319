"""The answers of the operator's explicit actions (docs/api.md): publishing a Decision
(POST /api/operator/chat/decision) and filing an issue (POST /api/operator/chat/file).

Declared once here; `operator_api/schemas.py` generates their OpenAPI components from these
Structs. Every key is always sent; the schemas allow no other (`forbid_unknown_fields`).
This module imports nothing of ours: every layer may use it.
"""

from __future__ import annotations

from msgspec import Struct


class Published(Struct, frozen=True, forbid_unknown_fields=True):
    """A Decision published (or the one a retry with the same key published before)."""

    published: bool
    issue: int
    comment_id: int
    comment_url: str


class Filed(Struct, frozen=True, forbid_unknown_fields=True):
    """An issue filed (or the one filed before under the same key)."""

    filed_issue_number: int
    filed_issue_url: str
    filed_task_started: bool
