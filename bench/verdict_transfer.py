"""The calibrated verdict judged by how it travels between the two tuning domains: the
recipes and the rule fixed before any of them was fitted (bench/HISTORY.md, "The verdict
judged by how it travels: domain-relative evidence (issue 31, g31 helper, 2026-12-06)").
`python -m bench.quality --fit-verdict --transfer DUMP ...`; writes nothing.

Each recipe (a feature set of bench.verdict_fit.CANDIDATES and a threshold rule; C=10,
balanced classes, each question weighing the same) is counted:

1. leave one domain out: fitted on Tallyho's tuning part alone and counted on Wren, and
   fitted on Wren alone and counted on Tallyho's tuning part;
2. pooled, cross-validated as bench/verdict_pool.py does (5 folds x 20, stratified by set
   and class): fitted on each training part of the pool, counted on its held-out part.

The pick: a candidate qualifies iff, against B (today's recipe) in the same run, it lets
through no more no-answer questions than B in each direction, tells no more answerable ones
"nothing" than B in each direction and at least LODO_GAIN fewer summed, and pooled lets
through at most B's + TIE per repeat and tells at most B's "nothing"; of those, the fewest
summed told "nothing" (within 1: fewer let through, then the order of RECIPES).

Information only (not candidates, a turn has no such figure): each set's features
standardised by its own questions' mean and scale, leave one domain out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.verdict_fit import (
    FEATURES,
    FOLDS,
    REPEATS,
    C,
    Rows,
    columns,
    fit,
    model_answers,
    stratified,
)
from bench.verdict_pool import Count, count, per_set

TIE = 0.05  # pooled let-through per repeat within which a candidate counts as no worse
LODO_GAIN = 0.10  # summed leave-one-domain-out told "nothing": at least this share fewer
NO_LEVELS = ("coverage", "missing_peak", "unknown_share", "held_share")
KNOWN = ("known_coverage", "missing_peak", "unknown_share", "held_share")
RANKS = (*NO_LEVELS, "log_margin", "agreeing_rounds")


@dataclass(frozen=True)
class Recipe:
    name: str
    features: tuple[str, ...]
    threshold_rule: str = "midway"

    def fitted_answers(self, rows: Rows, train: NDArray[np.int64], test: NDArray[np.int64]) -> Any:
        fitted = fit(rows, train, self.features, C, self.threshold_rule, "question")
        return model_answers(fitted, rows, test, self.features)


REFERENCE = Recipe("B today's recipe", FEATURES)
RECIPES = (
    REFERENCE,
    Recipe("D1 no absolute levels", NO_LEVELS),
    Recipe("D2 known share", KNOWN),
    Recipe("D3 ranks and margins", RANKS),
    Recipe("D4 B's, budget", FEATURES, "budget"),
    Recipe("D5 D1's, budget", NO_LEVELS, "budget"),
    Recipe("D6 D2's, budget", KNOWN, "budget"),
    Recipe("D7 D3's, budget", RANKS, "budget"),
    Recipe("D8 B without best", tuple(f for f in FEATURES if f != "best")),
    Recipe("D9 B without log_terms", tuple(f for f in FEATURES if f != "log_terms")),
)
INFORMATION = (
    Recipe("I1 B's, each set standardised by its own questions", FEATURES),
    Recipe("I2 D1's, each set standardised by its own questions", NO_LEVELS),
)


@dataclass(frozen=True)
class Judged:
    across: dict[str, Count]  # "T->W", "W->T"
    pooled: Count | None

    def let_through(self) -> float:
        return sum(c.let_through for c in self.across.values())

    def told_nothing(self) -> float:
        return sum(c.told_nothing for c in self.across.values())


def across(rows: Rows, recipe: Recipe) -> dict[str, Count]:
    """Fitted on one tuning set alone, counted on the other."""
    sets = dict(per_set(rows))
    out = {}
    for label, fitted_on, counted_on in (
        ("T->W", "tallyho-tuning", "wren"),
        ("W->T", "wren", "tallyho-tuning"),
    ):
        said = recipe.fitted_answers(rows, sets[fitted_on], sets[counted_on])
        out[label] = count(rows, said, sets[counted_on])
    return out


def pooled(rows: Rows, recipe: Recipe) -> Count:
    """Cross-validated on the pool, per repeat."""
    everything = np.arange(len(rows.answerable))
    said = np.zeros((REPEATS, len(everything)), dtype=bool)
    for k, (train, test) in enumerate(stratified(rows, everything, REPEATS)):
        said[k // FOLDS, test] = recipe.fitted_answers(rows, train, test)
    total = [count(rows, said[r], everything) for r in range(REPEATS)]
    return Count(
        sum(t.let_through for t in total) / REPEATS,
        total[0].no_answer,
        sum(t.told_nothing for t in total) / REPEATS,
        total[0].answerable,
    )


def standardised_per_set(rows: Rows, features: tuple[str, ...]) -> Rows:
    """Each set's columns of `features` standardised by that set's own questions."""
    x = rows.x.copy()
    cols = columns(features)
    for _, index in per_set(rows):
        part = x[np.ix_(index, cols)]
        scale = np.where(part.std(axis=0) > 0, part.std(axis=0), 1.0)
        x[np.ix_(index, cols)] = (part - part.mean(axis=0)) / scale
    return replace(rows, x=x)


def qualifies(judged: Judged, reference: Judged) -> bool:
    """The rule of the module docstring (bench/HISTORY.md)."""
    assert judged.pooled is not None and reference.pooled is not None
    each = all(
        judged.across[d].let_through <= reference.across[d].let_through
        and judged.across[d].told_nothing <= reference.across[d].told_nothing
        for d in reference.across
    )
    fewer = judged.told_nothing() <= (1 - LODO_GAIN) * reference.told_nothing() + 1e-9
    pool = (
        judged.pooled.let_through <= reference.pooled.let_through + TIE + 1e-9
        and judged.pooled.told_nothing <= reference.pooled.told_nothing + 1e-9
    )
    return each and fewer and pool


def pick(table: dict[Recipe, Judged]) -> Recipe | None:
    reference = table[REFERENCE]
    allowed = [r for r in RECIPES[1:] if qualifies(table[r], reference)]
    if not allowed:
        return None
    least = min(table[r].told_nothing() for r in allowed)
    tied = [r for r in allowed if table[r].told_nothing() <= least + 1]
    return min(tied, key=lambda r: (table[r].let_through(), RECIPES.index(r)))


def main(rows: Rows) -> int:
    table: dict[Recipe, Judged] = {}
    for recipe in RECIPES:
        judged = Judged(across(rows, recipe), pooled(rows, recipe))
        table[recipe] = judged
        print(f"{recipe.name} ({', '.join(recipe.features)}; {recipe.threshold_rule}):")
        for label, c in judged.across.items():
            print(f"  leave one domain out, {label}  {c}")
        print(
            f"  leave one domain out, summed: let through {judged.let_through():.0f},"
            f" told nothing {judged.told_nothing():.0f}"
        )
        print(f"  pooled, cross-validated per repeat {judged.pooled}", flush=True)
    for recipe in INFORMATION:
        judged = Judged(across(standardised_per_set(rows, recipe.features), recipe), None)
        print(f"{recipe.name} ({', '.join(recipe.features)}; information):")
        for label, c in judged.across.items():
            print(f"  leave one domain out, {label}  {c}")
    reference = table[REFERENCE]
    for recipe in RECIPES[1:]:
        print(f"{recipe.name}: {'qualifies' if qualifies(table[recipe], reference) else 'no'}")
    chosen = pick(table)
    print(f"pick: {chosen.name if chosen else 'none (no candidate qualifies)'}")
    return 0
