"""The retrieval benchmark runs end to end (tiny sizes); its numbers live in bench/README.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_retrieval_benchmark_smoke_run_reports_index_and_baselines() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.retrieval", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for line in ("index build", "reload", "query top-8", "add 1,000 chunks"):
        assert line in out
    assert "TfidfVectorizer refit + brute-force cosine" in out
    assert "rank_bm25 BM25Okapi" in out
    for name in ("Tallyho", "Heron", "Larkspur"):  # the three labelled sets, aggregates only
        assert f"== grounding quality, {name}:" in out
    assert "Chat grounder: kept, 3 rounds (ours)" in out
    assert "failed" not in out
