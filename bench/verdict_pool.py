"""The calibrated verdict refitted on two tuning domains: the variants fixed before any of
them was fitted (bench/HISTORY.md, "The verdict refitted on two domains (issue 31, verdict2
helper, 2026-12-05)"), each judged on the pooled tuning data only
(`python -m bench.quality --fit-verdict --variants DUMP ...`; writes nothing).

- W0, the reference: today's recipe (FEATURES, C=10, the midway threshold) fitted on
  Tallyho's tuning part alone, as the committed model was.
- W1: the same recipe on the pooled data, each question weighing the same.
- W2: W1 with C re-selected among bench.verdict_select.CS by its objective on the pool.
- W3: W1 with the threshold of the "budget" rule (bench.verdict_fit.budget_threshold).
- W4: W1 with each set weighing the same.

Each is cross-validated on the pool (bench.verdict_fit.stratified: 5 folds x 20, stratified
by set and class; W2's C and W3's threshold chosen inside each training part), counted per
held-out set; judged across domains (fitted on one set, counted on the other); and counted
in-sample per set, the full fit's verdict on the recorded evidence (what the chat turn says
with those coefficients). The pick: among the variants that let through no more held-out
no-answer questions than W0 and tell at most 1.25x W0's answerable questions "nothing",
the one that lets through the fewest (within 0.05 per repeat: the one that tells the fewest
"nothing", then the lower number).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from bench.verdict_fit import (
    FEATURES,
    FOLDS,
    REPEATS,
    TUNING_SETS,
    C,
    Fitted,
    Rows,
    fit,
    model_answers,
    stratified,
)
from bench.verdict_select import CS, INNER_REPEATS, Candidate, choose

TIE = 0.05  # let-through per repeat within which two variants count as equal
TOLD_NOTHING_ALLOWANCE = 1.25  # at most this times W0's answerable questions told "nothing"


@dataclass(frozen=True)
class Variant:
    name: str
    pooled: bool  # fitted on the pool (W0: on Tallyho's tuning part alone)
    reselect_c: bool = False
    threshold_rule: str = "midway"
    weighting: str = "question"

    def fitted(self, rows: Rows, index: NDArray[np.int64]) -> Fitted:
        if not self.pooled:
            index = index[rows.sets[index] == "tallyho-tuning"]
        c = C
        if self.reselect_c:
            among = [Candidate(FEATURES, k) for k in CS]
            c = choose(rows, index, INNER_REPEATS, among)[0].c
        return fit(rows, index, FEATURES, c, self.threshold_rule, self.weighting)


VARIANTS = (
    Variant("W0 today's recipe, Tallyho tuning only", pooled=False),
    Variant("W1 pooled, same recipe", pooled=True),
    Variant("W2 pooled, C re-selected", pooled=True, reselect_c=True),
    Variant("W3 pooled, budget threshold", pooled=True, threshold_rule="budget"),
    Variant("W4 pooled, each set weighing the same", pooled=True, weighting="set"),
)


@dataclass(frozen=True)
class Count:
    """No-answer questions let through and answerable ones told "nothing", of how many."""

    let_through: float
    no_answer: int
    told_nothing: float
    answerable: int

    def __str__(self) -> str:
        return (
            f"let through {self.let_through:5.2f}/{self.no_answer:<3}"
            f" told nothing {self.told_nothing:5.1f}/{self.answerable}"
        )


def count(rows: Rows, said: NDArray[np.bool_], index: NDArray[np.int64], per: int = 1) -> Count:
    y = rows.answerable[index]
    return Count(
        int((said & ~y).sum()) / per, int((~y).sum()), int((~said & y).sum()) / per, int(y.sum())
    )


def cross_validated(rows: Rows, variant: Variant) -> dict[str, Count]:
    """Held-out counts per repeat, over the pool and per set."""
    everything = np.arange(len(rows.answerable))
    said = np.zeros((REPEATS, len(everything)), dtype=bool)
    parts = stratified(rows, everything, REPEATS)
    for k, (train, test) in enumerate(parts):
        said[k // FOLDS, test] = model_answers(variant.fitted(rows, train), rows, test)
    out = {}
    for name, index in (("pool", everything), *per_set(rows)):
        total = [count(rows, said[r, index], index) for r in range(REPEATS)]
        out[name] = Count(
            sum(t.let_through for t in total) / REPEATS,
            total[0].no_answer,
            sum(t.told_nothing for t in total) / REPEATS,
            total[0].answerable,
        )
    return out


def per_set(rows: Rows) -> list[tuple[str, NDArray[np.int64]]]:
    return [(n, np.flatnonzero(rows.sets == n)) for n in TUNING_SETS if (rows.sets == n).any()]


def across(rows: Rows, variant: Variant) -> dict[str, Count]:
    """Fitted on one set with the variant's recipe (W0's too), counted on the other: how it
    travels to a domain it never saw."""
    sets = per_set(rows)
    out = {}
    for (name, index), (other, fitted_on) in zip(sets, sets[::-1], strict=True):
        fitted = replace(variant, pooled=True).fitted(rows, fitted_on)
        said = model_answers(fitted, rows, index)
        out[f"fitted on {other}, counted on {name}"] = count(rows, said, index)
    return out


def in_sample(rows: Rows, variant: Variant) -> tuple[Fitted, dict[str, Count]]:
    everything = np.arange(len(rows.answerable))
    fitted = variant.fitted(rows, everything)
    said = model_answers(fitted, rows, everything)
    out = {"pool": count(rows, said, everything)}
    out |= {name: count(rows, said[index], index) for name, index in per_set(rows)}
    return fitted, out


def committed(rows: Rows) -> dict[str, Count]:
    """The committed coefficients (bot.chat.verdict_model) on the recorded evidence."""
    from bot.chat import verdict_model

    fitted = Fitted(
        np.asarray(verdict_model.MEAN),
        np.asarray(verdict_model.SCALE),
        np.asarray(verdict_model.COEF),
        verdict_model.INTERCEPT,
        verdict_model.THRESHOLD,
    )
    everything = np.arange(len(rows.answerable))
    said = model_answers(fitted, rows, everything, tuple(verdict_model.FEATURES))
    out = {"pool": count(rows, said, everything)}
    return out | {name: count(rows, said[index], index) for name, index in per_set(rows)}


def pick(table: dict[Variant, Count]) -> Variant | None:
    """The rule of the module docstring, on the pooled cross-validated counts."""
    reference = table[VARIANTS[0]]
    allowed = [
        v
        for v in VARIANTS[1:]
        if table[v].let_through <= reference.let_through + 1e-9
        and table[v].told_nothing <= TOLD_NOTHING_ALLOWANCE * reference.told_nothing + 1e-9
    ]
    if not allowed:
        return None
    least = min(table[v].let_through for v in allowed)
    tied = [v for v in allowed if table[v].let_through <= least + TIE]
    return min(tied, key=lambda v: (table[v].told_nothing, VARIANTS.index(v)))


def main(rows: Rows) -> int:
    print("committed model on the recorded evidence (in-sample):")
    for name, c in committed(rows).items():
        print(f"  {name:<16} {c}")
    pooled: dict[Variant, Count] = {}
    for variant in VARIANTS:
        fitted, inside = in_sample(rows, variant)
        cv = cross_validated(rows, variant)
        pooled[variant] = cv["pool"]
        print(f"{variant.name}: threshold {fitted.threshold:.4f},"
              f" coef {np.round(fitted.coef, 3).tolist()}")  # fmt: skip
        for name, c in cv.items():
            print(f"  cross-validated per repeat, {name:<16} {c}")
        for name, c in across(rows, variant).items():
            print(f"  across domains, {name:<40} {c}")
        for name, c in inside.items():
            print(f"  in-sample, {name:<16} {c}")
    chosen = pick(pooled)
    print(f"pick: {chosen.name if chosen else 'none (no variant qualifies)'}")
    return 0
