"""Choose the calibrated verdict's features and regularisation on the tuning part only
(`python -m bench.quality --fit-verdict --select [DUMP ...]`; docs/memory.md, Answerability).

The objective, fixed by the verdict helper on 2026-12-05 (14:17 UTC) before any candidate
was fitted: each candidate (a feature set and C; the threshold rule of bench.verdict_fit)
is cross-validated on the tuning part (stratified folds of questions, repeated, seed 0): the
held-out no-answer questions it says memory answers (`let_through`) and the held-out
answerable ones it says "nothing" to (`told_nothing`), per repeat. Among the candidates that
let through no more than the committed model (its features and C) on the same folds, the one
that tells the fewest answerable questions "nothing" is chosen (ties: fewer features, then
smaller C). The choice is itself cross-validated (nested: chosen on each outer training
part, counted on its held-out part, beside the committed model refitted on the same part);
a new model is adopted only if nested it lets through no more and tells fewer "nothing".
Nothing is written: the chosen features and C are set in bench/verdict_fit.py by hand,
with who chose them, when and on what, and refitted with `--fit-verdict`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.verdict_fit import FEATURES, C, Rows, Split, fit, model_answers, stratified

EXTRAS = (
    "spread", "log_margin", "agreement", "fits", "log_held", "held_share", "agreeing_rounds",
    "thread_fits",
)  # fmt: skip
CS = (0.1, 1.0, 10.0)
FOLDS, REPEATS = 5, 20  # the candidates' cross-validation (as bench.verdict_fit's)
OUTER_REPEATS, INNER_REPEATS = 4, 4  # nested: fewer, it fits every candidate per outer fold


@dataclass(frozen=True)
class Candidate:
    features: tuple[str, ...]
    c: float

    def __str__(self) -> str:
        return f"C={self.c:<4} {', '.join(self.features)}"


@dataclass(frozen=True)
class Counted:
    let_through: float  # held-out no-answer questions said to be answered, per repeat
    told_nothing: float  # held-out answerable questions said "nothing", per repeat


COMMITTED = Candidate(FEATURES, C)


def candidates() -> list[Candidate]:
    """The committed features, each without one of them, and with one or two of EXTRAS."""
    sets = [FEATURES]
    sets += [tuple(f for f in FEATURES if f != dropped) for dropped in FEATURES]
    sets += [(*FEATURES, *added) for n in (1, 2) for added in itertools.combinations(EXTRAS, n)]
    return [Candidate(features, c) for features in sets for c in CS]


def splits(rows: Rows, index: NDArray[np.int64], repeats: int) -> list[Split]:
    """Folds of the questions `index` (one row a question), stratified by set and class
    (bench.verdict_fit.stratified; on one set, by class as before), repeated, seed 0."""
    return stratified(rows, index, repeats)


def counted(rows: Rows, candidate: Candidate, parts: list[Split], repeats: int) -> Counted:
    let_through = told_nothing = 0
    for train, test in parts:
        said = model_answers(
            fit(rows, train, candidate.features, candidate.c), rows, test, candidate.features
        )
        y = rows.answerable[test]
        let_through += int((said & ~y).sum())
        told_nothing += int((~said & y).sum())
    return Counted(let_through / repeats, told_nothing / repeats)


def choose(
    rows: Rows, index: NDArray[np.int64], repeats: int, among: list[Candidate] | None = None
) -> tuple[Candidate, dict[Candidate, Counted]]:
    """The objective (module docstring) on the rows `index`, among `candidates()`."""
    parts = splits(rows, index, repeats)
    table = {k: counted(rows, k, parts, repeats) for k in among or candidates()}
    bar = table[COMMITTED].let_through + 1e-9
    allowed = [k for k in table if table[k].let_through <= bar]
    chosen = min(allowed, key=lambda k: (table[k].told_nothing, len(k.features), k.c))
    return chosen, table


def nested(rows: Rows) -> tuple[Counted, Counted, list[Candidate]]:
    """The choice cross-validated: (chosen, committed, the choices per outer fold)."""
    everything = np.arange(len(rows.answerable))
    ours, theirs = np.zeros(2), np.zeros(2)
    choices = []
    for train, test in splits(rows, everything, OUTER_REPEATS):
        chosen, _ = choose(rows, train, INNER_REPEATS)
        choices.append(chosen)
        for total, k in ((ours, chosen), (theirs, COMMITTED)):
            said = model_answers(fit(rows, train, k.features, k.c), rows, test, k.features)
            y = rows.answerable[test]
            total += [int((said & ~y).sum()), int((~said & y).sum())]
    per = [Counted(*(t / OUTER_REPEATS).tolist()) for t in (ours, theirs)]
    return per[0], per[1], choices


def main(rows: Rows) -> int:
    everything = np.arange(len(rows.answerable))
    chosen, table = choose(rows, everything, REPEATS)
    print(f"candidates cross-validated ({FOLDS} folds x {REPEATS}, per repeat):")
    for k in sorted(table, key=lambda k: (table[k].let_through, table[k].told_nothing)):
        mark = "*" if k == chosen else "c" if k == COMMITTED else " "
        print(f" {mark} let through {table[k].let_through:5.2f}"
              f"  told nothing {table[k].told_nothing:5.1f}  {k}")  # fmt: skip
    print(f"chosen: {chosen}")
    ours, theirs, choices = nested(rows)
    print(
        f"nested ({FOLDS} folds x {OUTER_REPEATS}, inner x {INNER_REPEATS}), per repeat:"
        f" the choice let through {ours.let_through:.2f}, told nothing {ours.told_nothing:.1f};"
        f" committed {theirs.let_through:.2f}, {theirs.told_nothing:.1f}"
    )
    for k in sorted(set(choices), key=str):
        print(f"  chosen in {choices.count(k)} of {len(choices)} outer folds: {k}")
    adopt = ours.let_through <= theirs.let_through and ours.told_nothing < theirs.told_nothing
    print("adopt the choice" if adopt and chosen != COMMITTED else "adopt nothing")
    return 0
