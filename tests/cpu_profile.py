"""`--cpu-profile=DIR`: where a test run's CPU goes, per test, child processes included.

Opt-in (`pytest -p tests.cpu_profile --cpu-profile=DIR ...`; the suite's conftest loads the
plugin, so `--cpu-profile=DIR` alone works). Each process (every xdist worker, or the one
process under `-n 0`) writes DIR/<worker>.jsonl: one line per test with the CPU seconds
(user + system) its process spent from setup to teardown and those of the child processes
reaped meanwhile (serve, worker, CLI, Chromium, git...), plus one line for its collection
(and the part of it pytest spent rewriting assertions). `python -m tests.cpu_profile DIR`
prints the table, sorted by total CPU.

A child counts only once it is reaped (getrusage(RUSAGE_CHILDREN)): a process a test leaves
running counts where it is reaped, and a grandchild whose parent does not wait for it not at
all. Threads count in their process. On a loaded machine the figures are CPU, not wall."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_STATE: dict[str, Any] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-profile",
        metavar="DIR",
        default=None,
        help="write per-test CPU seconds (process + reaped children) to DIR/<worker>.jsonl",
    )


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _write(record: dict[str, Any]) -> None:
    out = _STATE.get("out")
    if out is not None:
        out.write(json.dumps(record) + "\n")
        out.flush()


def pytest_configure(config: pytest.Config) -> None:
    folder = config.getoption("--cpu-profile", None)
    if not folder:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if worker == "main" and config.pluginmanager.hasplugin("xdist"):
        numprocesses = getattr(config.option, "numprocesses", None)
        if numprocesses:  # the controller: its workers write the records
            return
    Path(folder).mkdir(parents=True, exist_ok=True)
    _STATE["out"] = open(Path(folder) / f"{worker}.jsonl", "w")
    _STATE["worker"] = worker
    own, kids = _cpu()
    # Before this hook: the interpreter, pytest, its plugins and the initial conftests.
    _write({"kind": "startup", "worker": worker, "self": own, "children": kids})
    _count_rewrites()


def _count_rewrites() -> None:
    """Time pytest's assertion rewriting (parse, rewrite, compile a test module)."""
    from _pytest.assertion import rewrite

    original = rewrite._rewrite_test
    _STATE["rewrite_seconds"] = 0.0
    _STATE["rewritten"] = 0

    def timed(fn: Any, config: Any) -> Any:
        start = time.process_time()
        try:
            return original(fn, config)
        finally:
            _STATE["rewrite_seconds"] += time.process_time() - start
            _STATE["rewritten"] += 1

    rewrite._rewrite_test = timed  # type: ignore[assignment]


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    if "out" in _STATE:
        _STATE["collect_start"] = (time.monotonic(), *_cpu())


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if "collect_start" not in _STATE:
        return
    wall0, own0, kids0 = _STATE.pop("collect_start")
    own1, kids1 = _cpu()
    _write(
        {
            "kind": "collection",
            "worker": _STATE["worker"],
            "wall": time.monotonic() - wall0,
            "self": own1 - own0,
            "children": kids1 - kids0,
            "rewrite": _STATE["rewrite_seconds"],
            "rewritten": _STATE["rewritten"],
            "modules_loaded": len(sys.modules),
            "tests": len(session.items),
        }
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if "out" not in _STATE:
        yield
        return
    wall0 = time.monotonic()
    own0, kids0 = _cpu()
    yield
    own1, kids1 = _cpu()
    _write(
        {
            "kind": "test",
            "worker": _STATE["worker"],
            "nodeid": item.nodeid,
            "wall": time.monotonic() - wall0,
            "self": own1 - own0,
            "children": kids1 - kids0,
        }
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    out = _STATE.pop("out", None)
    if out is not None:
        own, kids = _cpu()
        out.write(json.dumps({"kind": "process", "self": own, "children": kids}) + "\n")
        out.close()


def table(folder: Path, top: int = 30) -> str:
    tests: list[dict[str, Any]] = []
    lines = []
    totals = {"self": 0.0, "children": 0.0}
    for path in sorted(folder.glob("*.jsonl")):
        for raw in path.read_text().splitlines():
            record = json.loads(raw)
            if record["kind"] == "test":
                tests.append(record)
            elif record["kind"] == "collection":
                lines.append(
                    f"collection {record['worker']}: wall {record['wall']:.1f} s, "
                    f"CPU {record['self']:.1f} s (+{record['children']:.1f} children), "
                    f"assertion rewriting {record['rewrite']:.1f} s "
                    f"({record['rewritten']} modules), {record['modules_loaded']} modules loaded"
                )
            elif record["kind"] == "startup":
                lines.append(
                    f"startup {record['worker']}: CPU {record['self']:.1f} s "
                    "(interpreter, plugins, initial conftests)"
                )
            elif record["kind"] == "process":
                totals["self"] += record["self"]
                totals["children"] += record["children"]
                lines.append(
                    f"process {path.stem}: CPU {record['self']:.1f} s "
                    f"+ children {record['children']:.1f} s"
                )
    tests.sort(key=lambda r: r["self"] + r["children"], reverse=True)
    in_tests = sum(r["self"] + r["children"] for r in tests)
    lines.append(
        f"{len(tests)} tests: CPU in tests {in_tests:.1f} s; whole workers "
        f"{totals['self']:.1f} s + children {totals['children']:.1f} s"
    )
    lines.append(f"{'total':>7} {'self':>7} {'kids':>7} {'wall':>7}  test")
    for r in tests[:top]:
        lines.append(
            f"{r['self'] + r['children']:7.2f} {r['self']:7.2f} {r['children']:7.2f} "
            f"{r['wall']:7.2f}  {r['nodeid']}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30))
