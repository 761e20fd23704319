"""The test processes' garbage collector: collections of the oldest generation made rare.

Why: a test process holds a large heap (the ~3,800 modules collection imports, every test
item, and what the in-process apps and caches keep), and CPython's default thresholds
(700, 10, 10) walk all of it again every few hundred thousand allocations: on 2026-12-06,
over four lifecycle, webhook, memory and TUI test files, 31 full collections took 5.7 of
31.5 CPU-seconds. With the thresholds below and the heap collection built frozen
(`gc.freeze`: left out of every later collection), they took 0.02 s; the young generations'
collections, which free the tests' short-lived cycles, took 2.3 s against 1.0 s.

What it does not change: the product's processes (serve, worker, CLI, started as
subprocesses) keep CPython's defaults; cycles are still freed, only later (pytest collects
once more at the session's end and reports what a finaliser raised, as before); a test that
needs a collection at a point calls `gc.collect()` itself.

Loaded by tests/conftest.py (`pytest_plugins`), so the thresholds hold from collection on.
"""

from __future__ import annotations

import gc

import pytest

# A young collection every 10,000 net allocations of container objects (CPython: 700); the
# middle one every 50 of those; the oldest every 100 of the middle ones, and then only when
# it has grown by a quarter (CPython's own rule).
THRESHOLDS = (10_000, 50, 100)


def pytest_configure(config: pytest.Config) -> None:
    gc.set_threshold(*THRESHOLDS)


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection built lives to the end: no collection needs to walk it again.
    gc.collect()
    gc.freeze()
