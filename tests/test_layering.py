"""`make lint`'s import contracts (pyproject.toml, [tool.importlinter]) can fail: on a copy
of the packages, each deliberate forbidden import (a lazy one too) breaks its contract, and
the untouched copy keeps them all."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "steelframe",
    "bot",
    "operator_api",
    "webhooks",
    "memory",
    "tui_client",
    "github_sandbox",
    "web_gui",
)
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    # The copy comes first on the path, ahead of the installed checkout.
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_untouched_layering_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", result.stdout)
    contracts = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert kept is not None and int(kept.group(1)) == contracts


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        # lazy: inside a function body, where a grep for top-level imports would not look
        ("bot/probe.py", "def f():\n    import operator_api.openapi\n", "The core (bot)"),
        ("operator_api/probe.py", "import webhooks.routing\n", "shells do not import"),
        ("webhooks/probe.py", "import operator_api.schemas\n", "shells do not import"),
        ("memory/probe.py", "from bot import config\n", "memory imports nothing"),
        ("webhooks/probe.py", "import github_sandbox.shapes\n", "never imports the GitHub"),
        ("steelframe/probe.py", "import github_sandbox\n", "never imports the GitHub"),
        ("tui_client/probe.py", "import bot.errors\n", "TUI client imports only"),
        ("web_gui/probe.py", "import webhooks.routing\n", "web GUI uses the core"),
        ("bot/probe.py", "import web_gui.routes\n", "The core (bot)"),
    ],
)
def test_a_forbidden_import_fails_lint(
    tmp_path: Path, module: str, source: str, contract: str
) -> None:
    root = _copy(tmp_path)
    (root / module).write_text(f'"""A deliberate layering break."""\n\n{source}')
    result = _lint(root)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts")[-1]
    assert contract in broken and module.removesuffix(".py").replace("/", ".") in broken
