"""No function in the core (`bot/`, `memory/`) is over 60 lines unless a comment right above
it says why (`# Long: ...`): past that, split where the split names a real step
(docs/architecture.md, "Conventions")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("bot", "memory")
MAX_LINES = 60
REASON = "# Long:"


def long_functions(root: Path = ROOT) -> list[str]:
    """`path:line name (N lines)` for each core function over MAX_LINES without a reason."""
    found: list[str] = []
    for package in CORE:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            lines = path.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(lines))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_LINES and not _has_reason(lines, node):
                    where = path.relative_to(root)
                    found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def _has_reason(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A `# Long:` comment in the comment block right above the function (or its
    decorators)."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 2
    while first >= 0 and lines[first].strip().startswith("#"):
        if lines[first].strip().startswith(REASON):
            return True
        first -= 1
    return False


def test_no_core_function_is_over_60_lines_without_a_reason() -> None:
    assert long_functions() == []


def test_the_check_finds_a_long_function_and_accepts_a_reason(tmp_path: Path) -> None:
    body = "".join(f"    x{n} = {n}\n" for n in range(MAX_LINES))
    (tmp_path / "bot").mkdir()
    (tmp_path / "memory").mkdir()
    (tmp_path / "bot" / "long.py").write_text(f"def too_long() -> None:\n{body}")
    assert long_functions(tmp_path) == [f"bot/long.py:1 too_long ({MAX_LINES + 1} lines)"]
    (tmp_path / "bot" / "long.py").write_text(
        f"# Long: one table, read top to bottom.\ndef too_long() -> None:\n{body}"
    )
    assert long_functions(tmp_path) == []
