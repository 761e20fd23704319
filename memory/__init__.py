"""Session memory: chunks with provenance, a TF-IDF cosine index on disk, committed memory.

Dependencies point inwards: `bot` uses `memory`, `memory` uses neither `bot` nor HTTP.
"""

from memory.chunks import Added, ChunkIn, ChunkSource, add_chunk, add_chunks
from memory.committed import CommittedFile, CommittedMemory, read_committed
from memory.errors import ChunkError, IndexCorrupt, IndexUnavailable
from memory.index import Hit
from memory.service import Memory

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
]
