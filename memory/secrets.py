"""Token-shaped text taken out of a chunk before it is stored.

Memory holds what anyone wrote on an issue, a pull request or a comment, and Chat puts it
into a model's prompt and shows it back as a citation: a GitHub token or a model key
pasted into an issue must not live on in the rows, the index on disk, or an answer. The
shapes live here, below `bot` (memory may not import it); the worker's redactor uses them.
Exact known values (the webhook secret, minted installation tokens) are the caller's
`Redactor`'s to take out: memory never knows them.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"
# Token-shaped text nobody told us: GitHub tokens, cloud and model keys, Authorization
# headers. The one list: the worker masks the same shapes in what an agent printed and in CI
# logs (bot.lifecycle.redact imports it). Bounded by what is not a letter or digit (not
# `\b`: `_` is a word character, and a token written as `key_ghp_...` or `ghp_..._` is
# still the token).
TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})(?![A-Za-z0-9])"
    r"|(?i:(?<=authorization: )(?:bearer |token |basic )?\S+)"
    r"|(?i:(?<=bearer )[A-Za-z0-9._~+/=-]{16,})"
)


def masked(text: str) -> str:
    """`text` with every token-shaped piece replaced by MASK."""
    return TOKEN_SHAPES.sub(MASK, text)
