"""`make lint`'s import contracts (pyproject.toml, [tool.importlinter]) can fail: on a copy
of the packages, each deliberate forbidden import (a lazy one too) breaks its contract, and
the untouched copy keeps them all. The core serves no HTTP: nothing in `bot/` imports
`aiohttp.web` (the client side of aiohttp it may use)."""

from __future__ import annotations

import ast
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
    "web_gui",
    "http_edge",
    "memory",
    "tui_client",
    "github_sandbox",
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
        ("bot/probe.py", "def f():\n    import operator_api.openapi\n", "Layers"),
        ("bot/probe.py", "import http_edge.errors\n", "Layers"),
        ("bot/probe.py", "import web_gui.routes\n", "Layers"),
        ("memory/probe.py", "from bot import config\n", "Layers"),
        ("http_edge/probe.py", "import operator_api.auth\n", "Layers"),
        # the shells stand side by side: none imports another, nor the entry package
        ("operator_api/probe.py", "import webhooks.routing\n", "Layers"),
        ("webhooks/probe.py", "import operator_api.schemas\n", "Layers"),
        ("web_gui/probe.py", "import operator_api.auth\n", "Layers"),
        ("webhooks/probe.py", "import web_gui.routes\n", "Layers"),
        ("operator_api/probe.py", "import steelframe.server\n", "Layers"),
        ("webhooks/probe.py", "import github_sandbox.shapes\n", "never imports the GitHub"),
        ("steelframe/probe.py", "import github_sandbox\n", "never imports the GitHub"),
        ("github_sandbox/probe.py", "import bot.errors\n", "sandbox speaks GitHub"),
        ("tui_client/probe.py", "import bot.errors\n", "TUI client imports only"),
        ("operator_api/probe.py", "import tui_client.api\n", "service never imports it"),
        ("webhooks/probe.py", "def f():\n    import tui_client\n", "service never imports it"),
        # a worker process: its own composition root, no web shell (lazily either)
        ("steelframe/worker_context.py", "import webhooks.routing\n", "imports no web shell"),
        (
            "steelframe/commands/worker.py",
            "def f():\n    import steelframe.composition\n",
            "imports no web shell",
        ),
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


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _serves_http(path: Path) -> bool:
    return any(name == "aiohttp.web" or name.startswith("aiohttp.web.") for name in _imports(path))


def test_the_core_imports_no_aiohttp_web() -> None:
    serving = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "bot").rglob("*.py") if _serves_http(path)
    )
    assert serving == []


def test_the_aiohttp_web_check_sees_a_lazy_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from aiohttp import web\n")
    assert _serves_http(probe)
