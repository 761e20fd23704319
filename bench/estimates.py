"""The estimate's error on a generated history of 200 runs of one repository (issue 34):
each run estimated from the runs before it, by the estimate from similar runs (agent, issue
text and size) and by the plain median of the repository's past, as the median absolute
error in tokens and relative to the run.

The history (seeded, as tests/test_estimates.py uses it): two agents, four kinds of
issue (each with its own words), issue texts of log-normal length; a run's tokens are
log-normal around e^8.5 (the spread of the plain history, sigma 0.6), moved by the kind
(-0.4 .. +0.5), the agent (+0.3 for one) and the text's length (elasticity 0.3). The
generator and the estimate's weights were fixed before either was measured.

    python -m bench estimates      (or python -m bench.estimates [--runs 200] [--seed 34])
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from bot.lifecycle import estimate, estimate_similar
from bot.lifecycle.estimate_similar import Past

AGENTS = {"claude": 0.0, "codex": 0.3}
KINDS = {
    "docs": (-0.4, "readme typo wording docs guide paragraph link heading"),
    "config": (0.0, "setting option flag default environment variable yaml"),
    "bug": (0.2, "crash error exception traceback fails regression wrong"),
    "feature": (0.5, "endpoint page api feature support new export import"),
}
FILLER = "the a this when it should please also we our users see after before with".split()


def history(runs: int = 200, seed: int = 34) -> list[Past]:
    draw = random.Random(seed)
    made = []
    for _ in range(runs):
        agent = draw.choice(list(AGENTS))
        kind = draw.choice(list(KINDS))
        shift, words = KINDS[kind]
        length = max(3, int(draw.lognormvariate(3.0, 0.7)))  # words in the issue
        vocabulary = words.split()
        text = " ".join(
            draw.choice(vocabulary) if draw.random() < 0.4 else draw.choice(FILLER)
            for _ in range(length)
        )
        mu = 8.5 + shift + AGENTS[agent] + 0.3 * math.log(len(text) / 100)
        made.append(Past(int(draw.lognormvariate(mu, 0.6)), 0.0, agent, text))
    return made


def relative_error(runs: list[Past], *, weighted: bool) -> float:
    errors = []
    for index in range(1, len(runs)):
        before, actual = runs[:index], runs[index]
        if weighted:
            found = estimate_similar.estimate(actual.agent, actual.text, before)
            guess = found.tokens if found is not None else None
        else:
            plain = estimate.of([p.tokens for p in before], [])
            guess = plain.tokens if plain is not None else None
        if guess is not None:
            errors.append(abs(actual.tokens - guess) / actual.tokens)
    return statistics.median(errors)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args(argv)
    runs = history(args.runs, args.seed)
    typical = sorted(p.tokens for p in runs)[len(runs) // 2]
    print(f"{len(runs)} runs, median run {typical:,} tokens")
    for name, weighted in (("similar runs", True), ("plain median", False)):
        error = estimate.median_absolute_error(runs, weighted=weighted)
        relative = relative_error(runs, weighted=weighted)
        print(f"{name:>13}: median absolute error {error:,.0f} tokens ({relative:.0%} of the run)")


if __name__ == "__main__":
    main()
