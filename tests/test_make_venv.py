"""`make run` on a stale .venv: one whose Python no longer runs (the interpreter it was made
from upgraded or removed) is made again, where its stamps once kept it and every command
failed with "make: .venv/bin/steelframe: No such file or directory"."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _planned(checkout: Path, *goals: str) -> list[str]:
    """What `make run` (or `goals`) would do there (-n: nothing is installed or run)."""
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", *(goals or ("run",))],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip().splitlines()


def _checkout_with_venv(tmp_path: Path, python: Path) -> Path:
    checkout = tmp_path / "p"
    (checkout / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", checkout)
    shutil.copy(ROOT / "pyproject.toml", checkout)
    (checkout / ".venv" / "bin" / "python").symlink_to(python)
    (checkout / ".venv" / ".installed-runtime").touch()  # installed after pyproject.toml
    return checkout


def test_a_venv_whose_python_is_gone_is_made_again(tmp_path: Path) -> None:
    checkout = _checkout_with_venv(tmp_path, Path("/nonexistent/python3.9"))
    planned = _planned(checkout)
    assert planned[0] == "==> .venv's Python no longer runs: making .venv again"
    assert ".venv/bin/python -c '' 2>/dev/null || python3 -m venv --clear .venv" in planned
    assert any("pip install" in line and "-e '.'" in line for line in planned), planned
    assert planned[-1] == ".venv/bin/steelframe dev"


def test_a_working_venv_is_kept(tmp_path: Path) -> None:
    checkout = _checkout_with_venv(tmp_path, Path(sys.executable))
    assert _planned(checkout) == [".venv/bin/steelframe dev"]


def test_clean_on_a_venv_whose_python_is_gone_only_cleans(tmp_path: Path) -> None:
    # It announced "making .venv again" first, a rebuild it never does.
    checkout = _checkout_with_venv(tmp_path, Path("/nonexistent/python3.9"))
    assert _planned(checkout, "clean") == ["rm -rf .venv var .pytest_cache .mypy_cache .ruff_cache"]
    assert (checkout / ".venv" / ".installed-runtime").exists()  # -n: nothing touched
    # Cleaning and then running still makes it again, as `make run` alone does.
    planned = _planned(checkout, "clean", "run")
    assert planned[0] == "==> .venv's Python no longer runs: making .venv again"
    assert planned[-1] == ".venv/bin/steelframe dev"
