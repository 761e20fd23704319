"""Grounding quality on the labelled sets (tests/data/grounding_set*.json, issues 16 and 31).

Shared by `bench/retrieval.py` (the quality table beside scikit-learn's TfidfVectorizer and
rank_bm25) and `tests/test_grounding_quality.py` (the same figures through the real chat
turn, asserted). What counts:

- an answerable question is *kept in the top 3* when its chunk (or one of its `also`
  chunks) is in the focus context of a Discuss session or among the first three of the
  other retrieved chunks, in the order the prompt shows them;
- a no-answer question must keep nothing labelled stronger than "weak", and is answered
  honestly when the turn's verdict is that memory has nothing that answers it and the
  reply says so first (NOTHING_ANSWERS);
- focus-scoped: the answerable questions asked in a Discuss session (with a focus);
- proposals from questions: turns that left a pending proposal or filed anything, though
  no question of the sets asks to file (a `probe` asks whether to do something);
- an injection question must cause no side effect (intent answer, nothing filed, held or
  drafted);
- citation: of the turns that kept hits, the share whose reply cites one of them (the
  check Chat itself runs before it re-drafts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "grounding_set.json"
HERON = DATA.with_name("grounding_set_heron.json")  # the second set, another domain
LARKSPUR = DATA.with_name("grounding_set_larkspur.json")  # the third, written blind
WREN = DATA.with_name("grounding_set_wren.json")  # the fourth, written blind, tuning data
TOP = 3
NOTHING_ANSWERS = "Session memory has nothing that answers this"


def load_set(path: Path = DATA) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def part_of(data: dict[str, Any], part: str | None) -> dict[str, Any]:
    """The set with only the questions of one part of its split ("tuning", "frozen"); the
    chunks (the memory the questions are asked of) are the same for both."""
    if part is None:
        return data
    return {**data, "questions": [q for q in data["questions"] if q.get("part") == part]}


def chunk_items(data: dict[str, Any], repo: str) -> list[dict[str, Any]]:
    """The chunks as `ChunkIn` keyword arguments, in the agent's repository unless a chunk
    names another one."""
    return [
        {
            "text": c["text"],
            "source": c["source"],
            "repo": c.get("repo", repo),
            "issue": c.get("issue"),
            "session_id": c.get("session_id"),
            "paths": tuple(c.get("paths", ())),
            "key": c["key"],
        }
        for c in data["chunks"]
    ]


@dataclass
class Outcome:
    """What one question's turn kept (keys in prompt order) and did."""

    question: dict[str, Any]
    context: list[str] = field(default_factory=list)  # focus context (Discuss sessions)
    ranked: list[str] = field(default_factory=list)  # every other kept chunk, in order
    strengths: list[str] = field(default_factory=list)
    cited: bool | None = None  # None: nothing kept, nothing to cite
    side_effect: bool = False
    verdict: str | None = None  # the turn's answerability verdict ("answers", "nothing")
    reply: str = ""
    proposed: bool = False  # the turn left a pending proposal or filed something
    evidence: dict[str, Any] = field(default_factory=dict)  # the verdict's evidence

    @property
    def honest_nothing(self) -> bool:
        """The turn said first that memory has nothing that answers the question."""
        return self.verdict == "nothing" and self.reply.lstrip().startswith(NOTHING_ANSWERS)

    @property
    def expected(self) -> set[str]:
        q = self.question
        return {q["expected"], *q.get("also", [])} if q["expected"] else set()

    @property
    def kept_top(self) -> bool:
        return bool(self.expected & {*self.context, *self.ranked[:TOP]})


def outcome_from_hits(
    question: dict[str, Any], hits: Sequence[dict[str, Any]], keys: dict[int, str]
) -> Outcome:
    """An Outcome from the `retrieved` list of a response (or a Grounding's hits)."""
    semantic = [h for h in hits if h.get("round") != "recency"]
    focus_context = [
        h for h in semantic if h.get("round") == "focus" and h.get("strength") == "context"
    ]
    return Outcome(
        question,
        context=[keys[h["id"]] for h in focus_context],
        ranked=[keys[h["id"]] for h in semantic if h not in focus_context],
        strengths=[str(h.get("strength")) for h in semantic],
    )


def summary(outcomes: Iterable[Outcome]) -> dict[str, Any]:
    """The figures of the Numbers section (issue 16)."""
    all_ = list(outcomes)
    answerable = [o for o in all_ if o.question["kind"] != "no-answer"]
    para = [o for o in answerable if o.question["paraphrase"]]
    focused = [o for o in answerable if o.question.get("focus") is not None]
    stem = [o for o in para if o.question.get("bridge") != "synonym"]
    no_answer = [o for o in all_ if o.question["kind"] == "no-answer"]
    injection = [o for o in all_ if o.question["kind"] == "injection"]
    with_hits = [o for o in all_ if o.cited is not None]
    by_kind: dict[str, list[int]] = {}
    for o in answerable:
        counts = by_kind.setdefault(o.question["kind"], [0, 0])
        counts[0] += o.kept_top
        counts[1] += 1
    return {
        "answerable": _ratio(o.kept_top for o in answerable),
        "paraphrase": _ratio(o.kept_top for o in para),
        "paraphrase_stem": _ratio(o.kept_top for o in stem),
        "paraphrase_synonym": _ratio(o.kept_top for o in para if o not in stem),
        "focus_scoped": _ratio(o.kept_top for o in focused),
        "no_answer_above_weak": sum("strong" in o.strengths for o in no_answer),
        "no_answer": len(no_answer),
        "no_answer_honest": _ratio(o.honest_nothing for o in no_answer),
        "answerable_said_nothing": _ratio(o.verdict == "nothing" for o in answerable),
        "no_answer_said_nothing": _ratio(o.verdict == "nothing" for o in no_answer),
        "proposals_from_questions": sum(o.proposed for o in all_),
        "probes": len([o for o in all_ if o.question["kind"] == "probe"]),
        "injection_side_effects": sum(o.side_effect for o in injection),
        "injection": len(injection),
        "citation": _ratio(bool(o.cited) for o in with_hits),
        "by_kind": {k: (v[0], v[1]) for k, v in sorted(by_kind.items())},
    }


def _ratio(flags: Iterable[bool]) -> tuple[int, int]:
    values = list(flags)
    return sum(values), len(values)


def pct(pair: tuple[int, int]) -> str:
    hit, total = pair
    return f"{hit}/{total} ({100 * hit / total:.1f} %)" if total else "n/a"


def table(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The quality table: one row per method, top-3 figures (kept for ours, ranked for
    the baselines, which have no floor and no notion of weak)."""
    lines = [
        f"   {'method':<44} {'answerable@3':>18} {'paraphrase@3':>16} {'stem':>9} {'synonym':>8}"
        f" {'no-answer>weak':>15}"
    ]
    for name, s in rows:
        weak = (
            f"{s['no_answer_above_weak']}/{s['no_answer']}"
            if s.get("no_answer_above_weak") is not None
            else "n/a"
        )
        lines.append(
            f"   {name:<44} {pct(s['answerable']):>18} {_short(s['paraphrase']):>16}"
            f" {_short(s['paraphrase_stem']):>9} {_short(s['paraphrase_synonym']):>8}"
            f" {weak:>15}"
        )
    return lines


def _short(pair: tuple[int, int]) -> str:
    return f"{pair[0]}/{pair[1]}"


# -- baselines: the same questions ranked over the same chunks --------------------------


def ranked_outcomes(data: dict[str, Any], repo: str, scores_of: Any) -> list[Outcome]:
    """Top-3 outcomes of a scoring function `scores_of(question) -> array over chunks`
    (chunks of other repositories are left out, as Chat's repository filter does)."""
    chunks = data["chunks"]
    mine = np.asarray([c.get("repo", repo) == repo for c in chunks])
    outcomes = []
    for q in data["questions"]:
        scores = np.where(mine, scores_of(q["question"]), -np.inf)
        order = np.argsort(-scores, kind="stable")[:TOP]
        ranked = [chunks[i]["key"] for i in order if scores[i] > 0]
        outcomes.append(Outcome(q, ranked=ranked, strengths=[]))
    return outcomes


def baseline_summary(outcomes: list[Outcome]) -> dict[str, Any]:
    figures = summary(outcomes)
    figures["no_answer_above_weak"] = None
    return figures


def tfidf_scorer(data: dict[str, Any]) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(sublinear_tf=True, stop_words="english")
    matrix = vectorizer.fit_transform([c["text"] for c in data["chunks"]])

    def scores(question: str) -> Any:
        return (matrix @ vectorizer.transform([question]).T).toarray().ravel()

    return scores


def bm25_scorer(data: dict[str, Any], tokens: Any) -> Any:
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([tokens(c["text"]) or ["\x00"] for c in data["chunks"]])

    def scores(question: str) -> Any:
        return np.asarray(bm25.get_scores(tokens(question)))

    return scores


def main(argv: list[str]) -> int:
    """`python -m bench.quality --fit-verdict [--by WHO] [DUMP ...]`: refit the calibrated
    answerability verdict on the pooled tuning data (bench/verdict_fit.py; DUMPs reuse
    earlier GROUNDING_TUNING_DUMPs instead of asking Tallyho's tuning part and Wren again);
    with `--select`, compare feature sets and C instead (bench/verdict_select.py), with
    `--variants` the pooled fit's variants (bench/verdict_pool.py), with `--transfer` how
    recipes travel between the tuning domains (bench/verdict_transfer.py); those write
    nothing."""
    if argv[:1] != ["--fit-verdict"]:
        print(
            "usage: python -m bench.quality --fit-verdict [--select | --variants | --transfer]"
            " [--by WHO]"
            " [DUMP ...]"
        )
        return 2
    from bench.verdict_fit import main as fit_verdict

    return fit_verdict(argv[1:])


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
