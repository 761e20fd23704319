"""How long `steelframe --version`, `--help`, `serve --help` and `worker --help` take,
beside a bare `python -c pass` in the same run (interleaved, so machine noise hits both alike).

The CLI imports only the module of the command being run, and a command's handler only once
it runs, so `--version` and `--help` must cost little more than the interpreter itself
(target: under 300 ms).

    python -m bench.cli_startup [--runs N] [--smoke]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from bench._stats import percentile, ratio

COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "steelframe --version": [sys.executable, "-m", "steelframe.cli", "--version"],
    "steelframe --help": [sys.executable, "-m", "steelframe.cli", "--help"],
    "steelframe serve --help": [sys.executable, "-m", "steelframe.cli", "serve", "--help"],
    "steelframe worker --help": [sys.executable, "-m", "steelframe.cli", "worker", "--help"],
}


def _time(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command")
    parser.add_argument("--smoke", action="store_true", help="one run each, to check it works")
    args = parser.parse_args(argv)
    runs = 1 if args.smoke else args.runs
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            samples[name].append(_time(command))
    baseline = percentile(samples["python -c pass (baseline)"], 50)
    print(f"{'command':28} {'p50':>9} {'p90':>9}  vs baseline")
    for name, times in samples.items():
        p50, p90 = percentile(times, 50), percentile(times, 90)
        print(f"{name:28} {p50 * 1000:7.1f}ms {p90 * 1000:7.1f}ms  {ratio(p50, baseline)}")


if __name__ == "__main__":
    main()
