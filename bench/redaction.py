"""Known secret values found in text (bot/lifecycle/redact.py): the Redactor's one-pass
automaton against the one regular expression of the values it replaced (longest first, as
it was), built from the same values in the same run, as a ratio.

The values are what a worker holds: the App key's 26 body lines and a webhook secret (with
their hex and base64 forms), then one installation token minted per run. Measured: adding
a run's token (the regex was compiled again each time) and redacting a run's log of 1 MB
(ordinary lines with a few secrets in them).

    python -m bench redaction      (or python -m bench.redaction [--log-mb 1] [--tokens 20])
"""

from __future__ import annotations

import argparse
import re
import secrets
import time
from collections.abc import Callable

from bot.lifecycle.redact import MASK, Redactor, encoded_forms, key_lines
from github_sandbox.keys import generate_app_keys


class AlternationBaseline:
    """The Redactor's masking as it was until 2026-12-06: one alternation, compiled per add."""

    def __init__(self, values: list[str]) -> None:
        self.values: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.add(*values)

    def add(self, *values: str) -> None:
        self.values |= {form for v in values for form in {v, *encoded_forms(v)}}
        ordered = sorted(self.values, key=len, reverse=True)
        self.pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def redact(self, text: str) -> str:
        assert self.pattern is not None
        return self.pattern.sub(MASK, text)


def worker_values() -> list[str]:
    pem, _ = generate_app_keys()  # an App key as GitHub issues them
    return [*key_lines(pem), f"whsec-{secrets.token_hex(16)}"]


def run_log(megabytes: float, planted: list[str]) -> str:
    line = "step 12: ran pytest -q tests/test_orders.py (41 passed) in 3.20 s\n"
    lines = [line] * int(megabytes * 1_000_000 / len(line))
    for index, value in enumerate(planted):
        lines[(index + 1) * len(lines) // (len(planted) + 1)] = f"leaked {value}\n"
    return "".join(lines)


def seconds(action: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-mb", type=float, default=1.0)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args(argv)
    values = worker_values()
    tokens = [f"ghs_{secrets.token_urlsafe(27)}" for _ in range(args.tokens)]
    redactor, baseline = Redactor(values), AlternationBaseline(values)
    print(f"{len(values)} values; adding {args.tokens} tokens, one per run", flush=True)

    def add_each(target: Redactor | AlternationBaseline) -> float:
        started = time.perf_counter()
        for token in tokens:
            target.add(token)
        return (time.perf_counter() - started) / len(tokens)

    add_new, add_old = add_each(redactor), add_each(baseline)
    log = run_log(args.log_mb, [values[3], tokens[-1], values[-1]])
    assert redactor.redact(log) == baseline.redact(log), "the two disagree"
    print(f"redacting a {args.log_mb:g} MB log", flush=True)
    redact_new = seconds(lambda: redactor.redact(log), 3)
    redact_old = seconds(lambda: baseline.redact(log), 3)
    print(f"{'':20} {'automaton':>12} {'alternation':>12} {'ratio':>8}")
    for name, new, old in (
        ("add a token", add_new, add_old),
        ("redact the log", redact_new, redact_old),
    ):
        print(f"{name:20} {new * 1e3:10.2f}ms {old * 1e3:10.2f}ms {old / new:7.1f}x")


if __name__ == "__main__":
    main()
