"""Memory retrieval benchmark: the on-disk TF-IDF index against refit-and-scan baselines.

    python -m bench.retrieval                      # 10k, 100k and 1M chunks
    python -m bench.retrieval --sizes 10000,100000
    python -m bench.retrieval --smoke              # tiny, a few seconds (run by the tests)

A synthetic corpus is generated in the run: English stop words and pronounceable made-up
words, Zipf-distributed (s=1.0, 50k words), 60-100 words a chunk, provenance like Chat's.
Every measurement runs in its own child process, so each peak memory (VmHWM) is its own.
First, the grounding quality table: the labelled set (tests/data/grounding_set.json) through
Chat's grounder and through the index alone, beside TfidfVectorizer and rank_bm25 ranking the
same chunks for the same questions (bench/quality.py says what counts).
Queries go through `Memory.search`, the call Chat and the workers make. Each query holds
three words of a target chunk plus Zipf noise; `target@8` is how often that chunk comes back
in the top 8, and `agree@8` how much of our top 8 the scikit-learn baseline also returns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from memory.analysis import Analyzer
from memory.segment import Record

SEED = 20260
VOCABULARY = 50_000
ZIPF_S = 1.0
BATCH = 10_000
REPOS = ("acme/app", "acme/infra", "acme/docs", "other/tool")
SOURCES = ("chat_summary", "worker_session", "issue", "comment", "pull_request")
FULL_SIZES = (10_000, 100_000, 1_000_000)
ADD_ROUNDS = 5
ADD_SIZE = 1_000


class Corpus:
    """Deterministic synthetic chunks: chunk i is the same in every process and run."""

    def __init__(self, seed: int = SEED) -> None:
        self.seed = seed
        stop = sorted(ENGLISH_STOP_WORDS)
        self.words = np.array(stop + _made_up_words(VOCABULARY - len(stop), seed, set(stop)))
        self.n_stop = len(stop)
        ranks = np.arange(1, self.words.size + 1, dtype=np.float64)
        weights = 1.0 / ranks**ZIPF_S
        self.cdf = np.cumsum(weights / weights.sum())

    def word_ids(self, start: int, count: int) -> list[np.ndarray[Any, Any]]:
        rng = np.random.default_rng([self.seed, start])
        lengths = rng.integers(60, 101, count)
        ids = np.minimum(
            np.searchsorted(self.cdf, rng.random(int(lengths.sum()))), self.words.size - 1
        )
        return np.split(ids, np.cumsum(lengths)[:-1])

    def records(self, start: int, count: int) -> list[Record]:
        """Chunks start+1 .. start+count (ids are 1-based, like database rows)."""
        rng = np.random.default_rng([self.seed, start, 1])
        out = []
        for offset, ids in enumerate(self.word_ids(start, count)):
            chunk_id = start + offset + 1
            source = SOURCES[chunk_id % len(SOURCES)]
            repo = REPOS[0] if rng.random() < 0.7 else REPOS[int(rng.integers(1, len(REPOS)))]
            issue = int(rng.integers(1, 5000)) if rng.random() < 0.5 else None
            out.append(
                Record(
                    id=chunk_id,
                    source=source,
                    repo=repo,
                    text=" ".join(self.words[ids].tolist()) + ".",
                    issue=issue,
                    session_id=f"s{chunk_id:08x}" if source == "chat_summary" else None,
                    paths=(f"src/mod{chunk_id % 97}.py",) if source == "worker_session" else (),
                )
            )
        return out

    def batches(self, total: int, start: int = 0) -> Iterator[list[Record]]:
        for offset in range(start, start + total, BATCH):
            yield self.records(offset, min(BATCH, start + total - offset))

    def texts(self, total: int) -> Iterator[str]:
        for batch in self.batches(total):
            for record in batch:
                yield record.text

    def queries(self, total: int, count: int) -> list[dict[str, Any]]:
        """Three content words of a random target chunk, plus six Zipf words of noise."""
        rng = np.random.default_rng([self.seed, 7])
        targets = np.sort(rng.choice(total, size=min(count, total), replace=False))
        queries = []
        for target in targets.tolist():
            start = (target // BATCH) * BATCH
            ids = self.word_ids(start, min(BATCH, total - start))[target - start]
            content = np.unique(ids[ids >= self.n_stop])
            picked = rng.choice(content, size=min(3, content.size), replace=False)
            noise = np.searchsorted(self.cdf, rng.random(6))
            words = self.words[np.concatenate([picked, noise])].tolist()
            rng.shuffle(words)
            queries.append({"target": target + 1, "text": " ".join(words)})
        return queries


def _made_up_words(count: int, seed: int, avoid: set[str]) -> list[str]:
    onsets = np.array("b c d f g h j k l m n p r s t v w z br cr dr fl gr pl st tr sh ch".split())
    vowels = np.array("a e i o u ai ea ou io".split())
    codas = np.array(["", "", "n", "r", "s", "t", "l", "nd", "st", "m"])
    rng = np.random.default_rng([seed, 3])
    words: list[str] = []
    seen = set(avoid)
    while len(words) < count:
        n = 2 * count
        syllables = [
            np.char.add(
                np.char.add(
                    onsets[rng.integers(onsets.size, size=n)],
                    vowels[rng.integers(vowels.size, size=n)],
                ),
                codas[rng.integers(codas.size, size=n)],
            )
            for _ in range(4)
        ]
        length = rng.integers(2, 5, size=n)
        joined = np.char.add(syllables[0], syllables[1])
        joined = np.where(length >= 3, np.char.add(joined, syllables[2]), joined)
        joined = np.where(length >= 4, np.char.add(joined, syllables[3]), joined)
        for word in joined.tolist():
            if word not in seen:
                seen.add(word)
                words.append(word)
    return words[:count]


# -- children: one measurement each -----------------------------------------------------


def child_build(size: int, work: Path, queries: int) -> dict[str, Any]:
    from memory.writer import IndexWriter

    corpus = Corpus()
    root = work / f"index-{size}"
    writer = IndexWriter(root, Analyzer())
    started = time.perf_counter()
    manifest = writer.rebuild(corpus.batches(size), catch_up=lambda: (size, {}))
    seconds = time.perf_counter() - started
    (work / f"queries-{size}.json").write_text(json.dumps(corpus.queries(size, queries)))
    return {
        "build_s": seconds,
        "build_peak_mib": _peak_mib(),
        "disk_mib": _disk_mib(root),
        "segments": len(manifest.segments),
        "postings": sum(s.postings for s in manifest.segments),
    }


def child_query(size: int, work: Path, queries: int) -> dict[str, Any]:
    from memory.service import Memory

    corpus = Corpus()
    root = work / f"index-{size}"
    items = json.loads((work / f"queries-{size}.json").read_text())
    started = time.perf_counter()
    # The index alone (memory.index.SearchIndex), as Memory.search uses it once bound to its
    # database: the benchmark measures the search, not the binding's one database read.
    memory = Memory(root, _no_database)
    index = memory.index
    index.snapshot()
    reload_s = time.perf_counter() - started
    for item in items[:5]:
        index.search(item["text"], repo=REPOS[0], k=8)
    latencies = []
    for item in items:
        t0 = time.perf_counter()
        index.search(item["text"], repo=REPOS[0], k=8)
        latencies.append(time.perf_counter() - t0)
    ours = {}
    found = 0
    for item in items:
        hits = [h.chunk_id for h in index.search(item["text"], repo=None, k=8)]
        ours[item["target"]] = hits
        found += item["target"] in hits
    (work / f"ours-{size}.json").write_text(json.dumps(ours))
    adds = []
    for round_number in range(ADD_ROUNDS):
        batch = corpus.records(size + round_number * ADD_SIZE, ADD_SIZE)
        t0 = time.perf_counter()
        with memory.writer.update() as update:
            update.add(batch)
        adds.append(time.perf_counter() - t0)
    after = []
    for item in items[: min(len(items), 50)]:
        t0 = time.perf_counter()
        index.search(item["text"], repo=REPOS[0], k=8)
        after.append(time.perf_counter() - t0)
    return {
        "reload_s": reload_s,
        "query_p50_ms": _ms(np.percentile(latencies, 50)),
        "query_p99_ms": _ms(np.percentile(latencies, 99)),
        "queries": len(latencies),
        "target_at_8": found / max(1, len(items)),
        "add_1000_ms_median": _ms(float(np.median(adds))),
        "add_1000_ms_max": _ms(max(adds)),
        "query_p50_after_adds_ms": _ms(np.percentile(after, 50)),
        "query_peak_mib": _peak_mib(),
    }


def child_tfidf(size: int, work: Path, queries: int) -> dict[str, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    corpus = Corpus()
    texts = list(corpus.texts(size))
    items = json.loads((work / f"queries-{size}.json").read_text())[:queries]
    ours = json.loads((work / f"ours-{size}.json").read_text())
    started = time.perf_counter()
    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english", dtype=np.float32)
    matrix = vectorizer.fit_transform(texts)
    fit_s = time.perf_counter() - started
    del texts
    latencies, found, agree = [], 0, []
    for item in items:
        t0 = time.perf_counter()
        scores = (matrix @ vectorizer.transform([item["text"]]).T).toarray().ravel()
        top = np.argpartition(-scores, 8)[:8] if scores.size > 8 else np.arange(scores.size)
        top = top[np.argsort(-scores[top])]
        latencies.append(time.perf_counter() - t0)
        hits = (top + 1).tolist()
        found += item["target"] in hits
        agree.append(len(set(hits) & set(ours[str(item["target"])])) / 8)
    return {
        "refit_s": fit_s,
        "peak_mib": _peak_mib(),
        "query_p50_ms": _ms(np.percentile(latencies, 50)),
        "query_p99_ms": _ms(np.percentile(latencies, 99)),
        "queries": len(latencies),
        "target_at_8": found / max(1, len(items)),
        "agree_at_8": float(np.mean(agree)),
    }


def child_bm25(size: int, work: Path, queries: int) -> dict[str, Any]:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        return {"skipped": "rank_bm25 is not installed (pip install rank-bm25)"}
    analyzer = Analyzer()
    corpus = Corpus()
    items = json.loads((work / f"queries-{size}.json").read_text())[:queries]
    started = time.perf_counter()
    bm25 = BM25Okapi([analyzer.tokens(text) for text in corpus.texts(size)])
    build_s = time.perf_counter() - started
    latencies, found = [], 0
    for item in items:
        t0 = time.perf_counter()
        scores = bm25.get_scores(analyzer.tokens(item["text"]))
        top = np.argpartition(-scores, 8)[:8] if scores.size > 8 else np.arange(scores.size)
        latencies.append(time.perf_counter() - t0)
        found += item["target"] in (top + 1).tolist()
    return {
        "build_s": build_s,
        "peak_mib": _peak_mib(),
        "query_p50_ms": _ms(np.percentile(latencies, 50)),
        "query_p99_ms": _ms(np.percentile(latencies, 99)),
        "queries": len(latencies),
        "target_at_8": found / max(1, len(items)),
    }


def quality_report() -> list[str]:
    """The quality tables (issues 16 and 31) on the three labelled sets, measured in this
    process: the first set whole (its tuning and frozen parts together), then the second and
    third, all evaluation (aggregate figures only)."""
    from bench import quality

    lines: list[str] = []
    for name, path in (
        ("Tallyho", quality.DATA),
        ("Heron", quality.HERON),
        ("Larkspur", quality.LARKSPUR),
    ):
        lines += set_report(name, quality.load_set(path))
    return lines


def set_report(name: str, data: dict[str, Any]) -> list[str]:
    """One set's quality table: the chat grounder beside the baselines."""
    import asyncio

    from bench import quality
    from bot.config import AgentConfig
    from bot.db import Database, upgrade
    from memory import ChunkIn
    from memory.service import Memory

    repo = str(data.get("repo_placeholder") or "tallyho/tallyho")
    with tempfile.TemporaryDirectory(prefix="bench-quality-") as temporary:
        folder = Path(temporary)
        database = Database.from_url(f"sqlite:///{folder / 'quality.db'}")
        upgrade(database.engine)
        memory = Memory(folder / "memory", database.session)
        items = quality.chunk_items(data, repo)
        added = memory.add([ChunkIn(**item) for item in items])
        keys = {a.id: item["key"] for a, item in zip(added, items, strict=True)}
        (folder / "checkout").mkdir()
        agent = AgentConfig("default", repo, folder / "checkout", "offline")
        turn, rounds = asyncio.run(_ground_all(memory, agent, data, keys))
        index = [
            quality.Outcome(
                q,
                ranked=[
                    keys[h.chunk_id]
                    for h in memory.search(q["question"], repo=repo, focus=q["focus"], k=3)
                ],
            )
            for q in data["questions"]
        ]
        analyzer = memory.analyzer
        database.dispose()
    rows = [
        ("Chat grounder: kept, 3 rounds (ours)", quality.summary(turn)),
        ("memory.search top 3, no rounds (ours)", quality.baseline_summary(index)),
        (
            "TfidfVectorizer (sublinear tf, english stop)",
            quality.baseline_summary(
                quality.ranked_outcomes(data, repo, quality.tfidf_scorer(data))
            ),
        ),
    ]
    try:
        rows.append(
            (
                "rank_bm25 BM25Okapi, our analysis",
                quality.baseline_summary(
                    quality.ranked_outcomes(data, repo, quality.bm25_scorer(data, analyzer.tokens))
                ),
            )
        )
        rows.append(
            (
                "rank_bm25 BM25Okapi, lower-case words",
                quality.baseline_summary(
                    quality.ranked_outcomes(data, repo, quality.bm25_scorer(data, _plain_words))
                ),
            )
        )
    except ImportError:
        pass
    paraphrases = sum(q["paraphrase"] for q in data["questions"])
    ours = quality.summary(turn)
    lines = [
        f"== grounding quality, {name}: {len(data['chunks'])} chunks, {len(data['questions'])}"
        f" questions ({paraphrases} paraphrases), top 3",
        *quality.table(rows),
        f'   verdict "nothing": no-answer {quality.pct(ours["no_answer_said_nothing"])},'
        f" answerable {quality.pct(ours['answerable_said_nothing'])};"
        f" focus-scoped kept {quality.pct(ours['focus_scoped'])}",
        "   rounds (ran / hits / context / expected chunk found): "
        + "; ".join(
            f"{name} {r['ran']}/{r['hits']}/{r['context']}/{r['found']}"
            for name, r in rounds.items()
        ),
    ]
    return lines


async def _ground_all(
    memory: Any, agent: Any, data: dict[str, Any], keys: dict[int, str]
) -> tuple[list[Any], dict[str, dict[str, int]]]:
    from bench import quality
    from bot.chat.retrieval import MemoryGrounder
    from bot.contracts.hits import hits_json

    grounder = MemoryGrounder(memory)
    rounds: dict[str, dict[str, int]] = {}

    async def ignore(frame: dict[str, Any]) -> None:
        return None

    outcomes = []
    for q in data["questions"]:
        grounding = await grounder.ground(
            query=q["question"], agent=agent, focus=q["focus"], emit=ignore
        )
        # the hits as the chat response carries them (what the quality test reads too)
        outcome = quality.outcome_from_hits(q, hits_json(grounding.kept_hits), keys)
        outcome.verdict = grounding.verdict.value
        outcomes.append(outcome)
        for entry in grounding.meta.get("rounds", []):
            r = rounds.setdefault(entry["query"], {"ran": 0, "hits": 0, "context": 0, "found": 0})
            r["ran"] += 1
            r["hits"] += entry["hits"]
            r["context"] += entry["context"]
            r["found"] += bool(outcome.expected & {keys[i] for i in entry["ids"]})
    return outcomes, rounds


def _plain_words(text: str) -> list[str]:
    return text.lower().split()


CHILDREN = {"build": child_build, "query": child_query, "tfidf": child_tfidf, "bm25": child_bm25}


def _no_database() -> Any:
    raise RuntimeError("the benchmark searches the index only")


def _peak_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _disk_mib(root: Path) -> float:
    total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    return round(total / 2**20, 1)


def _ms(seconds: float) -> float:
    return round(float(seconds) * 1000, 2)


# -- the parent: runs the children, prints the report -----------------------------------


def run_child(
    kind: str, size: int, work: Path, queries: int, *, isolated: bool = True
) -> dict[str, Any]:
    """One measurement in a child process (its own peak memory), or in this one (smoke)."""
    if not isolated:
        started = time.perf_counter()
        measured = CHILDREN[kind](size, work, queries)
        return {**measured, "wall_s": round(time.perf_counter() - started, 1)}
    command = [sys.executable, "-m", "bench.retrieval", "--child", kind, "--size", str(size)]
    command += ["--workdir", str(work), "--queries", str(queries)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"failed": done.stderr.strip().splitlines()[-1:] or ["no output"]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def report(size: int, results: dict[str, dict[str, Any]]) -> list[str]:
    build, query = results["build"], results["query"]
    tfidf, bm25 = results.get("tfidf", {}), results.get("bm25", {})
    lines = [f"== {size:,} chunks"]
    if "failed" in build or "failed" in query:
        return [*lines, f"   index failed: {build.get('failed') or query.get('failed')}"]
    lines += [
        f"   index build        {build['build_s']:8.1f} s   peak {build['build_peak_mib']:7.0f} MiB"
        f"   disk {build['disk_mib']:.0f} MiB, {build['segments']} segment(s),"
        f" {build['postings']:,} postings",
        f"   reload             {query['reload_s'] * 1000:8.1f} ms",
        f"   query top-8        p50 {query['query_p50_ms']:6.2f} ms"
        f"   p99 {query['query_p99_ms']:6.2f} ms   ({query['queries']} queries, repo filter;"
        f" target@8 {query['target_at_8']:.2f})",
        f"   add 1,000 chunks   median {query['add_1000_ms_median']:6.1f} ms   max"
        f" {query['add_1000_ms_max']:6.1f} ms   (p50 query after {ADD_ROUNDS} adds:"
        f" {query['query_p50_after_adds_ms']:.2f} ms)",
    ]
    for name, base in (("tfidf", tfidf), ("bm25", bm25)):
        label = {
            "tfidf": "TfidfVectorizer refit + brute-force cosine",
            "bm25": "rank_bm25 BM25Okapi",
        }[name]
        if not base:
            continue
        if "skipped" in base or "failed" in base:
            lines.append(f"   {label}: {base.get('skipped') or base.get('failed')}")
            continue
        build_s = base.get("refit_s", base.get("build_s", 0.0))
        ratio_q = base["query_p50_ms"] / max(query["query_p50_ms"], 1e-9)
        ratio_b = build_s * 1000 / max(query["add_1000_ms_median"], 1e-9)
        extra = f", agree@8 with ours {base['agree_at_8']:.2f}" if "agree_at_8" in base else ""
        lines += [
            f"   {label}",
            f"      build/refit {build_s:8.1f} s   peak {base['peak_mib']:7.0f} MiB"
            f"   (refit to add 1,000 = {ratio_b:,.0f}x our add)",
            f"      query p50 {base['query_p50_ms']:8.2f} ms  p99 {base['query_p99_ms']:8.2f} ms"
            f"   = {ratio_q:,.1f}x ours   ({base['queries']} queries, target@8"
            f" {base['target_at_8']:.2f}{extra})",
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__)
    parser.add_argument("--sizes", default=",".join(map(str, FULL_SIZES)))
    parser.add_argument("--queries", type=int, default=200, help="timed queries on our index")
    parser.add_argument("--baseline-queries", type=int, default=50)
    parser.add_argument("--tfidf-max", type=int, default=1_000_000, help="largest size to refit")
    parser.add_argument("--bm25-max", type=int, default=100_000, help="largest size for rank_bm25")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for the test suite")
    parser.add_argument("--quality-only", action="store_true", help="only the quality table")
    parser.add_argument("--workdir", type=Path, help="keep indexes here (default: a temp dir)")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = CHILDREN[args.child](args.size, args.workdir, args.queries)
        print(json.dumps(result))
        return 0
    sizes = [2_000] if args.smoke else [int(s) for s in args.sizes.split(",")]
    queries = 20 if args.smoke else args.queries
    base_queries = 10 if args.smoke else args.baseline_queries
    isolated = not args.smoke  # smoke: one process, so it stays within a few seconds
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-", dir=args.workdir) as temporary:
        work = Path(temporary)
        python = sys.version.split()[0]
        print(f"bench.retrieval: sizes {sizes}, cores {os.cpu_count()}, python {python}")
        started = time.perf_counter()
        print("\n".join(quality_report()), flush=True)
        if args.quality_only:
            return 0
        failed = False
        for size in sizes:
            results = {
                "build": run_child("build", size, work, queries, isolated=isolated),
                "query": run_child("query", size, work, queries, isolated=isolated),
            }
            if size <= args.tfidf_max:
                results["tfidf"] = run_child("tfidf", size, work, base_queries, isolated=isolated)
            else:
                results["tfidf"] = {"skipped": f"not run above {args.tfidf_max:,} (--tfidf-max)"}
            if size <= args.bm25_max:
                results["bm25"] = run_child(
                    "bm25", size, work, min(base_queries, 20), isolated=isolated
                )
            else:
                results["bm25"] = {
                    "skipped": f"not run above {args.bm25_max:,} chunks: it keeps a Python dict"
                    " per chunk and scores every chunk per query (see bench/README.md)"
                }
            failed |= any("failed" in r for r in results.values())
            print("\n".join(report(size, results)), flush=True)
            for name in ("index", "queries", "ours"):
                _remove(work, name, size)
        print(f"total {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


def _remove(work: Path, name: str, size: int) -> None:
    import shutil

    for path in work.glob(f"{name}-{size}*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()


if __name__ == "__main__":
    raise SystemExit(main())
