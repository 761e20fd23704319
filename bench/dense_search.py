"""Hybrid ranking's search cost: `DenseVectors.nearest` (memory/dense.py), a brute-force dot
product over every stored vector, at a given number of chunks and dimensions.

    python -m bench.dense_search                       # 100k chunks at 384, 768, 1536
    python -m bench.dense_search --chunks 20000 --dims 768
    python -m bench.dense_search --smoke               # tiny, under a second
    python -m bench.dense_search --local --dims 256    # also the `local` model's embedding time

Random unit vectors (the time does not depend on their values) written in parts of 10,000
as a backfill writes them, reopened from disk (memory-mapped), then the top 20 of every
chunk for 20 random questions: the median and the worst query, the store's size on disk
and its load time, beside the bare product over one contiguous matrix in memory.
docs/memory.md ("Hybrid ranking", What it costs) quotes a run. Set OPENBLAS_NUM_THREADS=1
on a shared machine: BLAS threads fighting for busy cores made the search 3x slower there.

`--local` first times the `local` provider (bot/chat/embeddings_local.py, wordllama's
bundled model): loading it, and embedding the labelled set's chunk texts (cut as the client
cuts them) in the dense round's batches of 64, cycled to LOCAL_TEXTS texts, per 1,000.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from memory.dense import DenseKey, DenseVectors

LOCAL_TEXTS = 5_000

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


def local_embedding(texts: int = LOCAL_TEXTS) -> dict[str, float]:
    """The local model's load time and its embedding time per 1,000 real chunk texts."""
    from bench.quality import load_set
    from bot.chat.embeddings import TEXT_CHARS
    from bot.chat.embeddings_local import LocalEmbeddings
    from bot.chat.hybrid import BATCH

    sample = [chunk["text"][:TEXT_CHARS] for chunk in load_set()["chunks"]]
    cycled = [sample[n % len(sample)] for n in range(texts)]
    model = LocalEmbeddings("l2_supercat")
    started = time.perf_counter()
    model.embed(["load"])
    load = time.perf_counter() - started
    # the longest a chunk is embedded: set texts joined up to the client's cut
    joined = " ".join(sample)
    longest = [joined[n * 97 % len(joined) :][:TEXT_CHARS] for n in range(texts)]
    figures = {"load_s": load, "mean_chars": sum(map(len, cycled)) / texts}
    for name, batch in (("per_1000_s", cycled), ("longest_per_1000_s", longest)):
        started = time.perf_counter()
        for start in range(0, texts, BATCH):
            model.embed(batch[start : start + BATCH])
        figures[name] = (time.perf_counter() - started) * 1000 / texts
    return figures


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dims", default="384,768,1536")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--local", action="store_true", help="time the local model too")
    args = parser.parse_args(argv)
    if args.local:
        local = local_embedding(200 if args.smoke else LOCAL_TEXTS)
        print(
            f"local model l2_supercat: load {local['load_s']:.2f} s, "
            f"embedding {local['per_1000_s']:.2f} s per 1,000 chunks "
            f"(the set's chunks, mean {local['mean_chars']:.0f} characters), "
            f"{local['longest_per_1000_s']:.2f} s at 2,000 characters each (batches of 64)",
            flush=True,
        )
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
