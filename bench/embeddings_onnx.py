"""What the `onnx` embeddings provider costs (bot/chat/embeddings_onnx.py), as ratios against
the `local` provider (wordllama's static model) measured in the same run on the same texts.

    .venv/bin/python -m bench.embeddings_onnx --model-dir DIR [--reference REF.npz]

DIR is an encoder exported to ONNX (model.onnx, tokenizer.json, sentence-transformers'
configs). The texts are the repository's own docs (docs/*.md), prose lines cut into short
chunks (at most SHORT_CHARS) and long ones (TEXT_CHARS, as the client cuts a chunk), so the
run needs no data set. Each provider is measured in a fresh process: load seconds, resident
memory after loading and after embedding, chunks per second at one and two intra-op threads
(the onnx provider; wordllama has no such knob). `--reference` is a file of texts and
vectors some other implementation computed for `--write-sample`'s texts (for MiniLM:
sentence-transformers on torch); the run prints the cosine of each onnx row with its
reference row. Also printed: the installed size of the optional extra's packages.
`--smoke` runs it all on a tiny random-weights model (tests/fakes/tiny_encoder.py) in seconds.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import multiprocessing
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHORT_CHARS = 200
TEXT_CHARS = 2_000  # bot.chat.embeddings.TEXT_CHARS
BATCH = 64  # texts per provider call, as the dense round sends a backlog
EXTRA = ("onnxruntime", "tokenizers", "flatbuffers", "protobuf")  # what `[onnx]` installs


@dataclass(frozen=True)
class Cost:
    provider: str
    threads: int
    load_seconds: float
    loaded_mb: float  # resident memory added by loading
    peak_mb: float  # resident memory added, after embedding everything
    short_per_second: float
    long_per_second: float
    dimension: int


def docs_texts() -> tuple[list[str], list[str]]:
    """Short chunks (prose lines of docs/*.md, markup stripped, cut at SHORT_CHARS) and long
    ones (each doc's text in TEXT_CHARS slices), in a fixed order."""
    short: list[str] = []
    long: list[str] = []
    seen: set[str] = set()
    for path in sorted((ROOT / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        prose = re.sub(r"[`*|#>_\[\]]", " ", text)
        long += [prose[i : i + TEXT_CHARS] for i in range(0, len(prose) - TEXT_CHARS, TEXT_CHARS)]
        for line in prose.splitlines():
            line = " ".join(line.split())[:SHORT_CHARS]
            if len(line) >= 40 and line not in seen and not line.startswith("-"):
                seen.add(line)
                short.append(line)
    return short, long


def _measure(
    provider: str, model: str, threads: int, short: list[str], long: list[str]
) -> Cost:  # in a fresh process
    import psutil

    process = psutil.Process()
    before = process.memory_info().rss
    started = time.perf_counter()
    if provider == "onnx":
        from bot.chat.embeddings_onnx import OnnxEmbeddings

        embedder: OnnxEmbeddings | LocalEmbeddings = OnnxEmbeddings(model, threads=threads)
    else:
        from bot.chat.embeddings_local import LocalEmbeddings

        embedder = LocalEmbeddings(model)
    dimension = embedder.embed(["warm up: loads the model"]).shape[1]
    load = time.perf_counter() - started
    loaded = process.memory_info().rss
    rates = []
    for texts in (short, long):
        started = time.perf_counter()
        for start in range(0, len(texts), BATCH):
            embedder.embed(texts[start : start + BATCH])
        rates.append(len(texts) / (time.perf_counter() - started))
    mb = 1 / 2**20
    return Cost(
        provider,
        threads,
        load,
        (loaded - before) * mb,
        (process.memory_info().rss - before) * mb,
        rates[0],
        rates[1],
        dimension,
    )


def measure(provider: str, model: str, threads: int, short: list[str], long: list[str]) -> Cost:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_measure, (provider, model, threads, short, long))


def installed_mb(names: tuple[str, ...]) -> dict[str, float]:
    sizes: dict[str, float] = {}
    for name in names:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        total = sum(f.size or 0 for f in files)
        sizes[name] = total / 2**20
    return sizes


def cosines(model_dir: str, reference: Path) -> np.ndarray:
    from bot.chat.embeddings_onnx import OnnxEmbeddings

    data = np.load(reference, allow_pickle=True)
    texts = [str(t) for t in data["texts"]]
    ours = OnnxEmbeddings(model_dir).embed(texts)
    theirs = np.asarray(data["vectors"], np.float32)
    theirs = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    result: np.ndarray = (ours * theirs).sum(axis=1)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", help="an encoder exported to ONNX")
    parser.add_argument("--reference", type=Path, help="texts + vectors (.npz) to compare with")
    parser.add_argument("--write-sample", type=Path, help="write the short texts, one a line")
    parser.add_argument("--short", type=int, default=1_000, help="short chunks to embed")
    parser.add_argument("--long", type=int, default=100, help="long chunks to embed")
    parser.add_argument("--smoke", action="store_true", help="a tiny random model, few texts")
    args = parser.parse_args(argv)
    short, long = docs_texts()
    if args.write_sample:
        args.write_sample.write_text("\n".join(short[: args.short]) + "\n", encoding="utf-8")
        print(f"wrote {min(len(short), args.short)} texts to {args.write_sample}")
        return
    if args.smoke:
        from tests.fakes import tiny_encoder

        args.model_dir = str(tiny_encoder.write(Path(tempfile.mkdtemp()) / "tiny"))
        args.short, args.long = 50, 5
    if not args.model_dir:
        parser.error("--model-dir (or --smoke) is required")
    if len(short) < args.short or len(long) < args.long:
        print(f"note: the docs give {len(short)} short and {len(long)} long chunks")
    short, long = short[: args.short], long[: args.long]
    print(
        f"{len(short)} short chunks (mean {np.mean([len(t) for t in short]):.0f} chars), "
        f"{len(long)} long ({TEXT_CHARS} chars); {os.cpu_count()} CPUs; batches of {BATCH}"
    )
    base = measure("local", "l2_supercat", 1, short, long)
    rows = [base] + [measure("onnx", args.model_dir, t, short, long) for t in (1, 2)]
    print(
        "| provider | threads | dim | load s | RSS after load MB | RSS after run MB "
        "| short chunks/s | long chunks/s | short time vs local | long time vs local |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row.provider} | {row.threads} | {row.dimension} | {row.load_seconds:.2f} "
            f"| {row.loaded_mb:.0f} | {row.peak_mb:.0f} | {row.short_per_second:.0f} "
            f"| {row.long_per_second:.1f} | x{base.short_per_second / row.short_per_second:.1f} "
            f"| x{base.long_per_second / row.long_per_second:.1f} |"
        )
    sizes = installed_mb(EXTRA)
    listed = ", ".join(f"{name} {mb:.1f}" for name, mb in sizes.items())
    new = sum(mb for name, mb in sizes.items() if name != "tokenizers")  # wordllama's already
    print(f"installed MB: {listed}; total {sum(sizes.values()):.1f}, new to an install {new:.1f}")
    if args.reference:
        found = cosines(args.model_dir, args.reference)
        print(
            f"cosine with the reference over {len(found)} texts: min {found.min():.7f} "
            f"(1 - min = {1 - found.min():.1e}), mean {found.mean():.7f}, "
            f"below 0.999: {(found < 0.999).sum()}"
        )


if __name__ == "__main__":
    main()
