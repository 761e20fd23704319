"""A work horse's own memory: what RQ's fork of the worker copies once the horse's garbage
collector has walked the heap it inherited, with the worker's heap frozen first
(`bot.heap_freeze.frozen_for_fork`, as `LifecycleWorker.fork_work_horse` forks) beside a
plain fork, in the same run, as a ratio.

The worker's heap is what `steelframe worker` imports. Each horse allocates as a job would
(`--job-mb` of small objects), runs a full collection (a long job's collector gets there),
and reports its private dirty memory (`/proc/self/smaps_rollup`): the pages no longer
shared with the worker.

    python -m bench worker_fork_memory   (or python -m bench.worker_fork_memory [--rounds 3])
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
from collections.abc import Callable
from contextlib import AbstractContextManager

from bot.heap_freeze import frozen_for_fork


def private_dirty_kib() -> int:
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    raise RuntimeError("no Private_Dirty in /proc/self/smaps_rollup")


def horse_private_mib(around: Callable[[], AbstractContextManager[None]], job_mb: float) -> float:
    """Fork as the worker forks a horse; the horse's private dirty MiB after its job."""
    read, write = os.pipe()
    with around():
        pid = os.fork()
        if pid == 0:  # the horse
            os.close(read)
            job = [[n] for n in range(int(job_mb * 1_000_000 / 120))]  # ~120 B a list
            gc.collect()
            os.write(write, str(private_dirty_kib()).encode())
            del job
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        kib = int(answer.read())
    os.waitpid(pid, 0)
    return kib / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--job-mb", type=float, default=20.0)
    args = parser.parse_args(argv)
    print("importing what `steelframe worker` imports ...", flush=True)
    import steelframe.commands.worker
    import steelframe.composition  # noqa: F401

    gc.collect()
    print(f"worker heap: {len(gc.get_objects())} objects; {args.rounds} horses each", flush=True)
    frozen, plain = [], []
    for _ in range(args.rounds):
        frozen.append(horse_private_mib(frozen_for_fork, args.job_mb))
        plain.append(horse_private_mib(contextlib.nullcontext, args.job_mb))
    frozen_mib, plain_mib = statistics.median(frozen), statistics.median(plain)
    print(f"{'horse private dirty (median)':32} {'frozen':>10} {'plain fork':>11} {'ratio':>7}")
    print(
        f"{'after a ' + format(args.job_mb, 'g') + ' MB job and a full GC':32} "
        f"{frozen_mib:8.1f}MB {plain_mib:9.1f}MB {frozen_mib / plain_mib:6.2f}x"
    )


if __name__ == "__main__":
    main()
