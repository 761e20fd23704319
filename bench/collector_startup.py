"""CPU a command takes with the garbage collector's start-up policy (steelframe/collector.py:
no collection while the command's modules load, then frozen; `serve` with rare full
collections from its first step) beside the same command with CPython's defaults, in the
same run (interleaved, so machine noise hits both alike).

Each command runs as a fresh process through `steelframe.cli.main`; the baseline process
runs the same `main` with the policy's two start-up calls made no-ops, so the difference is
the policy alone. The CPU is the child's own (user + system, from wait4), not wall time:
the test suite starts ~700 such processes on two busy cores, where CPU is what they cost.

    python -m bench.collector_startup [--runs N] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._stats import percentile, ratio

# The command line of `steelframe` (the policy) and of the same without it (the baseline).
POLICY = "import sys; from steelframe.cli import main; raise SystemExit(main(sys.argv[1:]))"
DEFAULTS = (
    "import contextlib, sys; import steelframe.collector as c; "
    "c.modules_loaded = contextlib.nullcontext; c.start_serving = lambda: None; "
    "from steelframe.cli import main; raise SystemExit(main(sys.argv[1:]))"
)

# name -> (arguments, whether it serves until stopped). `reconcile` without Redis loads the
# whole lifecycle, then stops (exit 2): what `worker --help` measured until a command's
# `--help` no longer imported its work.
COMMANDS: dict[str, tuple[list[str], bool]] = {
    "config --list": (["config", "--list"], False),
    "reconcile, no Redis": (["reconcile"], False),
    "db upgrade (new SQLite)": (["db", "upgrade"], False),
    "serve to url: (new SQLite)": (["serve", "--port", "0"], True),
}


def _cpu(program: str, arguments: list[str], serves: bool, workdir: Path) -> float:
    """The child's CPU seconds: run to its end, or for a server to its `url:` line, then
    stopped with SIGINT as a person would."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    env = {
        **os.environ,
        "STEELFRAME_DATABASE_URL": f"sqlite:///{workdir / 'steelframe.db'}",
        "STEELFRAME_DATA_DIR": str(workdir / "var"),
        "STEELFRAME_REDIS_URL": "",  # unset: `reconcile` stops once its modules are loaded
    }
    with subprocess.Popen(
        [sys.executable, "-c", program, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=workdir,
        env=env,
    ) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if serves and line.startswith("url:"):
                child.send_signal(signal.SIGINT)
        _, status, usage = os.wait4(child.pid, 0)  # reaped here, for its resource usage
        child.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
    if child.returncode not in (0, -signal.SIGINT) and arguments != ["reconcile"]:
        raise RuntimeError(f"{' '.join(arguments)} exited with {child.returncode}")
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command and way")
    parser.add_argument(
        "--smoke", action="store_true", help="one run of one command, to check it works"
    )
    args = parser.parse_args(argv)
    runs = 1 if args.smoke else args.runs
    commands = dict(list(COMMANDS.items())[:1]) if args.smoke else COMMANDS
    ways: dict[str, str] = {"defaults": DEFAULTS, "policy": POLICY}
    samples: dict[tuple[str, str], list[float]] = {
        (name, way): [] for name in commands for way in ways
    }
    with tempfile.TemporaryDirectory(prefix="collector-startup-") as scratch:
        for run in range(runs):
            print(f"run {run + 1} of {runs} ...", file=sys.stderr, flush=True)
            for name, (arguments, serves) in commands.items():
                for way, program in ways.items():
                    cpu = _cpu(program, arguments, serves, Path(scratch) / "work")
                    samples[(name, way)].append(cpu)
    print(f"{'command':28} {'defaults p50':>13} {'policy p50':>11}  policy vs defaults")
    for name in commands:
        before = percentile(samples[(name, "defaults")], 50)
        after = percentile(samples[(name, "policy")], 50)
        print(f"{name:28} {before * 1000:10.0f} ms {after * 1000:8.0f} ms  {ratio(after, before)}")


if __name__ == "__main__":
    main()
