"""No import cycles, proved on the import graph grimp builds (import-linter's own): none
between two modules of bot/, memory, http_edge, the shells or the entry package, and none
between the subpackages and modules of any package there, each taken whole (bot.lifecycle
importing bot.config while bot.config imports something of bot.lifecycle is a cycle, even
when no single module closes it). Imports under TYPE_CHECKING and inside functions count:
they are arrows too. A cycle is shown as its path, each step with the line that makes it.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path

import grimp
import pytest

from tests.test_layering import _copy, _lint

# bot/ and what sits around it: memory below, http_edge and the shells above, the entry.
PACKAGES = ("bot", "memory", "http_edge", "operator_api", "webhooks", "web_gui", "steelframe")

# An arrow between two nodes, and one import (importer, imported) that makes it.
Edges = dict[str, dict[str, tuple[str, str]]]


@pytest.fixture(scope="module", name="graph")
def graph_fixture() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def module_edges(graph: grimp.ImportGraph) -> Edges:
    edges: Edges = defaultdict(dict)
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            edges[importer][imported] = (importer, imported)
    return edges


def sibling_edges(graph: grimp.ImportGraph, package: str) -> Edges:
    """The arrows between the children of `package`, each child with all below it."""
    depth = package.count(".") + 2

    def child(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return ".".join(module.split(".")[:depth])

    edges: Edges = defaultdict(dict)
    for importer in graph.find_descendants(package):
        source = child(importer)
        for imported in graph.find_modules_directly_imported_by(importer):
            target = child(imported)
            if source is not None and target is not None and target != source:
                edges[source].setdefault(target, (importer, imported))
    return edges


def components(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one node (Kosaraju, no recursion)."""
    order: list[str] = []
    seen: set[str] = set()
    for root in list(edges):
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(list(edges.get(root, {}))))]
        while stack:
            node, targets = stack[-1]
            following = next((t for t in targets if t not in seen), None)
            if following is None:
                stack.pop()
                order.append(node)
            else:
                seen.add(following)
                stack.append((following, iter(list(edges.get(following, {})))))
    reverse: dict[str, set[str]] = defaultdict(set)
    for source, targets in list(edges.items()):
        for target in targets:
            reverse[target].add(source)
    found: list[list[str]] = []
    placed: set[str] = set()
    for root in reversed(order):
        if root in placed:
            continue
        placed.add(root)
        component, todo = [], [root]
        while todo:
            node = todo.pop()
            component.append(node)
            for source in reverse[node] - placed:
                placed.add(source)
                todo.append(source)
        if len(component) > 1:
            found.append(sorted(component))
    return found


def shortest_cycle(edges: Edges, component: Iterable[str]) -> list[str]:
    """The shortest path from the component's first node back to itself."""
    members = sorted(component)
    start = members[0]
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(edges.get(node, {})):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if target in members and target not in parent:
                parent[target] = node
                queue.append(target)
    raise AssertionError(f"no cycle in {members}")  # a component always has one


def cycles(graph: grimp.ImportGraph, edges: Edges) -> list[str]:
    """Each cycle as its path, one step a line with the import that makes it."""
    shown = []
    for component in components(edges):
        path = shortest_cycle(edges, component)
        steps = []
        for source, target in pairwise(path):
            importer, imported = edges[source][target]
            details = graph.get_import_details(importer=importer, imported=imported)
            where = f"{importer}:{details[0]['line_number']}" if details else importer
            said = details[0]["line_contents"] if details else f"imports {imported}"
            steps.append(f"  {source} -> {target}   ({where}: {said})")
        shown.append(" -> ".join(path) + "\n" + "\n".join(steps))
    return shown


def test_no_two_modules_import_each_other_even_through_others(graph: grimp.ImportGraph) -> None:
    found = cycles(graph, module_edges(graph))
    assert not found, "import cycles between modules:\n" + "\n".join(found)


def test_no_subpackage_imports_back_what_imports_it(graph: grimp.ImportGraph) -> None:
    packages = sorted(module for module in graph.modules if graph.find_children(module))
    assert "bot.lifecycle" in packages and "bot" in packages  # the graph is the real one
    found = [
        f"inside {package}: {cycle}"
        for package in packages
        for cycle in cycles(graph, sibling_edges(graph, package))
    ]
    assert not found, "import cycles between subpackages:\n" + "\n".join(found)


def test_the_packages_import_each_other_one_way(graph: grimp.ImportGraph) -> None:
    edges: Edges = defaultdict(dict)
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            source, target = importer.split(".")[0], imported.split(".")[0]
            if source != target:
                edges[source].setdefault(target, (importer, imported))
    found = cycles(graph, edges)
    assert not found, "import cycles between packages:\n" + "\n".join(found)


def test_a_cycle_is_found_and_shown_with_the_lines_that_make_it() -> None:
    """The checks above can fail: a loop of three modules of two subpackages is caught at
    both levels, and named step by step."""
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.a.one", "pkg.b", "pkg.b.two", "pkg.c"):
        graph.add_module(module)
    graph.add_import(
        importer="pkg.a.one", imported="pkg.b.two", line_number=3, line_contents="from pkg.b…"
    )
    graph.add_import(importer="pkg.b.two", imported="pkg.c", line_number=5, line_contents="x")
    graph.add_import(importer="pkg.c", imported="pkg.a.one", line_number=7, line_contents="y")

    by_module = cycles(graph, module_edges(graph))
    assert len(by_module) == 1
    assert by_module[0].splitlines()[0] == "pkg.a.one -> pkg.b.two -> pkg.c -> pkg.a.one"
    assert "(pkg.b.two:5: x)" in by_module[0] and "(pkg.c:7: y)" in by_module[0]
    by_package = cycles(graph, sibling_edges(graph, "pkg"))
    assert [c.splitlines()[0] for c in by_package] == ["pkg.a -> pkg.b -> pkg.c -> pkg.a"]

    graph.remove_import(importer="pkg.c", imported="pkg.a.one")
    assert cycles(graph, module_edges(graph)) == []
    assert cycles(graph, sibling_edges(graph, "pkg")) == []


def test_lint_names_the_import_that_would_break_a_cycle(tmp_path: Path) -> None:
    """`make lint`'s acyclic contract (pyproject.toml) fails too, on a copy of the packages
    where the settings import the lifecycle back (lazily, as the cycle this test found)."""
    root = _copy(tmp_path)
    settings = root / "bot" / "config_values.py"
    lazy = "\n\ndef _probe() -> object:\n    from bot.lifecycle import tasks\n\n    return tasks\n"
    settings.write_text(settings.read_text() + lazy)
    result = _lint(root)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts")[-1]
    assert "No cycles are allowed in bot." in broken
    assert ".config_values -> .lifecycle" in broken
