"""Work released on threads at once, for the tests of what happens when requests,
deliveries or jobs arrive together."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def together(count: int, work: Callable[[int], T]) -> tuple[list[T], list[BaseException]]:
    """`work(0..count-1)` on threads released by one barrier; what each returned, and what
    each raised (in the order they finished)."""
    start = threading.Barrier(count)
    results: list[T] = []
    failed: list[BaseException] = []

    def one(n: int) -> None:
        start.wait()
        try:
            results.append(work(n))
        except Exception as exc:  # the caller reports every failure
            failed.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, failed
