"""Hybrid ranking's search cost: `DenseVectors.nearest` (memory/dense.py), a brute-force dot
product over every stored vector, at a given number of chunks and dimensions.

    python -m bench.dense_search                       # 100k chunks at 384, 768, 1536
    python -m bench.dense_search --chunks 20000 --dims 768
    python -m bench.dense_search --smoke               # tiny, under a second

Random unit vectors (the time does not depend on their values) written in parts of 10,000
as a backfill writes them, reopened from disk (memory-mapped), then the top 20 of every
chunk for 20 random questions: the median and the worst query, the store's size on disk
and its load time, beside the bare product over one contiguous matrix in memory.
docs/memory.md ("Hybrid ranking", What it costs) quotes a run. Set OPENBLAS_NUM_THREADS=1
on a shared machine: BLAS threads fighting for busy cores made the search 3x slower there.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from memory.dense import DenseKey, DenseVectors

PART = 10_000
QUERIES = 20
TOP = 20


def measure(chunks: int, dimension: int, root: Path) -> dict[str, float]:
    rng = np.random.default_rng(2026)
    key = DenseKey("openai", f"bench-{dimension}", "bench")
    store = DenseVectors.beside(root, key)
    whole = rng.standard_normal((chunks, dimension)).astype(np.float32)
    for start in range(0, chunks, PART):
        count = min(PART, chunks - start)
        ids = np.arange(start, start + count, dtype=np.int64)
        store.add(ids, whole[start : start + count])
    started = time.perf_counter()
    reopened = DenseVectors.beside(root, key)
    stored = reopened.count
    load = time.perf_counter() - started
    among = np.arange(chunks, dtype=np.int64)
    times = []
    for _ in range(QUERIES):
        question = rng.standard_normal(dimension).astype(np.float32)
        started = time.perf_counter()
        reopened.nearest(question, among, TOP)
        times.append(time.perf_counter() - started)
    bare = []  # the baseline: one contiguous matrix in memory, no parts, no mask
    for _ in range(QUERIES):
        question = rng.standard_normal(dimension).astype(np.float32)
        started = time.perf_counter()
        np.argpartition(-(whole @ question), TOP)[:TOP]
        bare.append(time.perf_counter() - started)
    disk = sum(path.stat().st_size for path in (root / "dense").iterdir())
    return {
        "chunks": stored,
        "mb": disk / 1e6,
        "load_ms": load * 1000,
        "p50_ms": float(np.median(times)) * 1000,
        "max_ms": max(times) * 1000,
        "bare_ms": float(np.median(bare)) * 1000,
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dims", default="384,768,1536")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    chunks, dims = (2_000, [64]) if args.smoke else (args.chunks, _ints(args.dims))
    for dimension in dims:
        with tempfile.TemporaryDirectory() as folder:
            row = measure(chunks, dimension, Path(folder))
        print(
            f"dense search, {row['chunks']:,} chunks x {dimension} dims: "
            f"{row['mb']:.0f} MB on disk, load {row['load_ms']:.0f} ms, "
            f"nearest p50 {row['p50_ms']:.1f} ms, max {row['max_ms']:.1f} ms; "
            f"bare in-memory product p50 {row['bare_ms']:.1f} ms "
            f"({row['p50_ms'] / max(row['bare_ms'], 1e-6):.2f}x)",
            flush=True,
        )


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
