"""Session memory: chunks with provenance, a TF-IDF cosine index on disk, committed memory.

Dependencies point inwards: `bot` uses `memory`, `memory` uses neither `bot` nor HTTP.

The names below load on first use (PEP 562): importing `memory.models` for the database
schema must not pull in scikit-learn, or every CLI command would pay for it at start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Added": "memory.chunks",
    "ChunkIn": "memory.chunks",
    "ChunkSource": "memory.chunks",
    "add_chunk": "memory.chunks",
    "add_chunks": "memory.chunks",
    "retract": "memory.chunks",
    "CommittedFile": "memory.committed",
    "CommittedMemory": "memory.committed",
    "read_committed": "memory.committed",
    "ChunkError": "memory.errors",
    "IndexCorrupt": "memory.errors",
    "IndexUnavailable": "memory.errors",
    "Hit": "memory.index",
    "Memory": "memory.service",
}
__all__ = [
    "Added",
    "ChunkError",
    "ChunkIn",
    "ChunkSource",
    "CommittedFile",
    "CommittedMemory",
    "Hit",
    "IndexCorrupt",
    "IndexUnavailable",
    "Memory",
    "add_chunk",
    "add_chunks",
    "read_committed",
    "retract",
]

if TYPE_CHECKING:
    from memory.chunks import Added, ChunkIn, ChunkSource, add_chunk, add_chunks, retract
    from memory.committed import CommittedFile, CommittedMemory, read_committed
    from memory.errors import ChunkError, IndexCorrupt, IndexUnavailable
    from memory.index import Hit
    from memory.service import Memory


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
