"""Thread pools whose threads are all running before the process accepts work.

`ThreadPoolExecutor` starts a thread inside `submit` whenever no idle one is waiting, and
`Thread.start` blocks its caller until the new thread has run. On the event loop that caller
is the loop: in a serve on a loaded machine (load average ~22) one such start took 4.6 s, every
request of the process waiting behind it, and a sessions list was answered 30 s late. Started
up front, a pool never starts a thread again (it only adds one while it has fewer than
`max_workers`), so running work on it costs the loop a queue put and nothing else.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor

# asyncio's default executor is a `ThreadPoolExecutor()`, whose size is this (CPython's
# `concurrent.futures.thread`: the process's CPUs, `os.process_cpu_count` from 3.13, plus 4
# for I/O-bound work, at most 32): the pool that replaces it keeps its size.
MAX_DEFAULT_THREADS = 32
DEFAULT_THREAD_NAME_PREFIX = "asyncio"


def default_executor_size() -> int:
    cpus = getattr(os, "process_cpu_count", os.cpu_count)() or 1
    return min(MAX_DEFAULT_THREADS, cpus + 4)


class StartedThreadPool(ThreadPoolExecutor):
    """A `ThreadPoolExecutor` whose `max_workers` threads are running when it is made:
    construct it at start-up, before the loop serves, never inside a request."""

    def __init__(self, max_workers: int, *, thread_name_prefix: str) -> None:
        super().__init__(max_workers, thread_name_prefix=thread_name_prefix)
        self.threads = self._start_every_thread(max_workers)

    def _start_every_thread(self, count: int) -> tuple[threading.Thread, ...]:
        # Each task holds its thread at the barrier until all `count` have started: no
        # thread is idle while the next task is submitted, so each submit starts a new one.
        barrier = threading.Barrier(count)

        def hold() -> threading.Thread:
            barrier.wait()
            return threading.current_thread()

        held: list[Future[threading.Thread]] = []
        try:
            for _ in range(count):
                held.append(self.submit(hold))
        except BaseException:  # a thread that could not start: release the others
            barrier.abort()
            self.shutdown(wait=True)
            raise
        return tuple(future.result() for future in held)


_INSTALLED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StartedThreadPool] = (
    weakref.WeakKeyDictionary()
)


def start_default_executor(loop: asyncio.AbstractEventLoop) -> StartedThreadPool:
    """Make `loop`'s default executor (`asyncio.to_thread`, `run_in_executor(None, ...)`,
    DNS lookups) a started pool of the default's size; once per loop, the same pool after.
    Call it before the loop first runs anything in its default executor: asyncio has no way
    to hand back the lazy one it would have made, which would be left idle.

    The loop still owns it: `asyncio.run` and `asyncio.Runner` join its threads at the end
    (`loop.shutdown_default_executor`), as they join the default one."""
    pool = _INSTALLED.get(loop)
    if pool is None:
        pool = StartedThreadPool(
            default_executor_size(), thread_name_prefix=DEFAULT_THREAD_NAME_PREFIX
        )
        loop.set_default_executor(pool)
        _INSTALLED[loop] = pool
    return pool
