"""Errors of the memory package: bad chunks, and an index that cannot answer."""

from __future__ import annotations


class MemoryError_(Exception):
    """Root of the memory errors; `message` is safe to show an operator."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ChunkError(MemoryError_):
    """A chunk failed validation (empty text, bad repo, unknown source...)."""


class IndexUnavailable(MemoryError_):
    """The index cannot be read; `steelframe memory reindex` rebuilds it from the database."""


class IndexCorrupt(IndexUnavailable):
    """A manifest or segment file is unreadable or does not match what the manifest says."""


class IndexIncompatible(IndexUnavailable):
    """The index was built with another analysis (tokens, hashing or weights)."""


class IndexForeign(IndexUnavailable):
    """The index was built from another database than the one this process uses."""


class TooBroad(MemoryError_):
    """A forget that would take more chunks than it may at once (`Memory.forget_saying`)."""

    def __init__(self, message: str, *, matched: int) -> None:
        super().__init__(message)
        self.matched = matched
