"""Two transactions interleaved at a chosen point: the first reads, the second runs to its
end meanwhile (or waits, if the first one's read holds what it needs), then the first
writes and commits. For checking that what a transaction read stays true until it commits."""

from __future__ import annotations

import threading
from collections.abc import Callable

from sqlalchemy.orm import Session

from bot.db import Database

# How long the second transaction gets to overtake the first one's read. A correct lock
# makes it wait the whole time; without one it overtakes at once.
CHANCE_TO_OVERTAKE = 2.0
PATIENCE = 30.0


def overtakes(
    first: Database,
    read_then_write: Callable[[Session, threading.Event, threading.Event], None],
    other: Callable[[], None],
) -> bool:
    """Run `read_then_write` in `first` until it has read (it sets its first event), then
    `other` in a thread of its own, then let the first write and commit (its second event).
    True when `other` finished between the first one's read and its write."""
    have_read, go_on, other_done = threading.Event(), threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def guarded(work: Callable[[], object], done: threading.Event) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # shown by the assertion below
                failures.append(exc)
            finally:
                done.set()

        return run

    reader = threading.Thread(
        target=guarded(lambda: first.call(read_then_write, have_read, go_on), have_read)
    )
    reader.start()
    assert have_read.wait(PATIENCE)
    overtaker = threading.Thread(target=guarded(other, other_done))
    overtaker.start()
    overtook = other_done.wait(CHANCE_TO_OVERTAKE)
    go_on.set()
    reader.join(PATIENCE)
    overtaker.join(PATIENCE)
    assert not failures, failures
    assert not reader.is_alive() and not overtaker.is_alive()
    return overtook
