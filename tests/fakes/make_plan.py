"""What `make` would run for a target of this checkout's Makefile (`make -n`), as a test
reads it: the last command it plans, with the venv counted as installed."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def planned_command(*target_and_variables: str) -> str:
    """`make -n TARGET VAR=...`'s last line. `-o`: the runtime venv counts as installed, so
    only the target's own command is planned; `--no-print-directory`: under `make test`
    this make is nested and would say so."""
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "-o", ".venv/.installed-runtime",
         *target_and_variables],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return result.stdout.strip().splitlines()[-1]
