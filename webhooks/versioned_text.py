"""GitHub text with the time GitHub last changed it (the item's `updated_at`): deliveries
of one issue or comment can arrive out of order (GitHub promises no order between them), and
an older edit delivered after a newer one must not replace it in memory.

A subclass rather than a field of `webhooks.chunks.GitHubText`, so that producers which do
not know the time yet (pull requests) are unchanged; the sink reads it when it is there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from webhooks.chunks import GitHubText


@dataclass(frozen=True)
class VersionedText(GitHubText):
    updated_at: datetime | None = None


def updated_at(chunk: GitHubText) -> datetime | None:
    """When GitHub last changed `chunk`'s item, if the handler said."""
    return chunk.updated_at if isinstance(chunk, VersionedText) else None
