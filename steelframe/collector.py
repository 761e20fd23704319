"""The garbage collector's policy: no collection while a command's modules load, which are
then frozen; in a serving process (`serve`, `dev`) rare full collections from the start, and
what start-up built frozen too once the app has started.

Loading a command's modules (1,400 of them for `serve`) makes objects that live as long as
the process and next to no garbage, yet CPython's collector ran ~250 young and two full
collections over them meanwhile, and every later full collection walked them all again.
Paused, then frozen (`gc.freeze`: left out of every later collection), a command takes
0.72-0.88x the CPU it took with CPython's defaults (bench/collector_startup.py: `config
--list`, `reconcile` loading the lifecycle, `db upgrade`, `serve` to `url:`); the test
suite starts ~700 such processes. Only the modules' objects are frozen: what a command
does afterwards is collected as before. (Garbage made while modules load, such as a failed
optional import's traceback, stays: a few objects, once.)

What a server's start-up built (ORM metadata, routers, the index) lives as long as the
process too: frozen once the app has started. And a full collection comes after 1,000
collections of the middle generation instead of CPython's 10: each one walks every object
alive, and with 1,000 chat streams open (or a burst of deliveries in flight) that stopped
the loop for 20-90 ms, several times while the streams opened. bench/chat_streams.py,
interleaved: first frame p99 28-31 ms against 48-50 ms with the default, the same resident
memory at the end. Garbage in reference cycles that outlives two younger collections waits
longer for the full one; everything else is freed as before, by reference counting or a
young collection. Set from the first step of `serve`'s start-up: its migrations and app
made two full collections more.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from bot import heap_freeze

FULL_COLLECTION_AFTER = 1000  # middle-generation collections (CPython's default: 10)


@contextlib.contextmanager
def modules_loaded() -> Iterator[None]:
    """No collection while the block loads modules; what it built is frozen after it, unless
    anyone froze objects before (a test process freezes its own heap: an app started in it
    must not freeze the tests' objects for good)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if heap_freeze.frozen_by() is None:
            heap_freeze.freeze("modules")
    finally:
        if was_enabled:
            gc.enable()


def thaw() -> None:
    """Give the loaded modules' objects back to the collector, for a process that freezes its
    heap for a moment itself and must be able to undo it (the forking worker:
    bot.heap_freeze.frozen_for_fork)."""
    heap_freeze.unfreeze_modules()


def start_serving() -> None:
    """Full collections as rare as in serving, from the first step of a serving process's
    start-up (migrations, the app's construction): young ones go on as usual."""
    _rare_full_collections()


def tune_for_serving() -> None:
    # Once per process (`dev` may start the app again), after the modules' freeze if any.
    if heap_freeze.frozen_by() in (None, "modules"):
        heap_freeze.freeze("serving")
    _rare_full_collections()


def _rare_full_collections() -> None:
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_AFTER)
