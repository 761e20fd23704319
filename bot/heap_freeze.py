"""What this process froze (`gc.freeze`) and why: one record of every freeze the service makes,
so that none of them has to ask the collector what is frozen.

`gc.get_freeze_count()` walks every frozen object (CPython 3.11 to 3.13 count a linked list).
A test process freezes the heap its collection built (tests/gc_policy.py: millions of
objects), and each `steelframe.cli.main` run in it asked that count again, as did each fork
of an in-process worker: up to a second a call on a loaded machine, ~1.4 CPU-minutes of a
whole test run (2026-12-07, py-spy over `make test`). The record answers at once. A freeze
made before the service's first (a test process's, a program embedding the service) is
found once, by the count, and recorded as the outside's.

The freezes (steelframe/collector.py says why each is made):
- "modules": a command's modules, once they are loaded;
- "serving": what a server's start-up built, once its app has started;
- a fork's, for as long as the worker forks (`frozen_for_fork`), undone after it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Literal

Owner = Literal["outside", "modules", "serving"]

# A flag, not the frozen count: frozen objects that are freed leave the count (a freeze of
# ours would have looked like none).
_owner: Owner | None = None
_looked_outside = False


def frozen_by() -> Owner | None:
    """Who froze objects of this process, if anyone did."""
    global _owner, _looked_outside
    if not _looked_outside:
        _looked_outside = True
        if _owner is None and gc.get_freeze_count() > 0:  # the one walk of the frozen
            _owner = "outside"
    return _owner


def freeze(by: Owner) -> None:
    """Freeze every object alive now, recorded as `by`'s."""
    global _owner
    frozen_by()  # an earlier freeze from outside is found before ours hides it
    gc.freeze()
    _owner = by


def unfreeze_modules() -> None:
    """Give the objects frozen when the modules were loaded back to the collector; nothing
    when anyone else froze (gc cannot unfreeze a part)."""
    global _owner
    if frozen_by() == "modules":
        gc.unfreeze()
        _owner = None


@contextlib.contextmanager
def frozen_for_fork() -> Iterator[None]:
    """The collector leaves the objects that exist now alone meanwhile, and in any process
    forked meanwhile for good. A work horse's full collections then never write to the
    worker's objects it inherited, so their pages stay shared with the worker instead of
    being copied into each horse: ~40 of a horse's ~110 MB (bench/worker_fork_memory.py).
    The worker's own collections go on once it ends, unless something had frozen objects
    before (gc cannot unfreeze a part: all stay frozen then)."""
    already = frozen_by() is not None
    gc.freeze()
    try:
        yield
    finally:
        if not already:
            gc.unfreeze()
