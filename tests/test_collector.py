"""The garbage collector's policy (steelframe/collector.py): a command's modules loaded without
collections and frozen, a serving process's start-up frozen once more and full collections
100x rarer than CPython's default, and a forking worker that can undo its own freeze."""

from __future__ import annotations

import json
import subprocess
import sys

from steelframe.collector import FULL_COLLECTION_AFTER

PROBE = """
import gc, json
from steelframe.collector import tune_for_serving
default = gc.get_threshold()
tune_for_serving()
frozen = gc.get_freeze_count()
garbage = [[] for _ in range(1000)]  # built after start-up: not frozen by a second call
tune_for_serving()
print(json.dumps({"default": default, "tuned": gc.get_threshold(), "frozen": frozen,
                  "again": gc.get_freeze_count()}))
"""


def _probe(source: str) -> dict[str, object]:
    probe = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, check=True, timeout=120
    )
    found: dict[str, object] = json.loads(probe.stdout.splitlines()[-1])
    return found


def test_serving_freezes_start_up_once_and_collects_everything_less_often() -> None:
    found = _probe(PROBE)
    young, middle, _ = found["default"]
    assert found["tuned"] == [young, middle, FULL_COLLECTION_AFTER]
    assert found["frozen"] > 1000  # the modules start-up imported, and what they built
    assert found["again"] == found["frozen"]


def test_a_command_runs_with_its_modules_frozen_and_the_collector_on() -> None:
    """Through `steelframe`'s own entry: the command's modules are left out of collections
    (frozen), and what the command makes afterwards is collected as usual."""
    found = _probe(
        """
import gc, json, sys
from steelframe.cli import main
assert gc.get_freeze_count() == 0
main(["config", "--list"])
frozen = gc.get_freeze_count()
cycle = []
cycle.append(cycle)  # garbage in a cycle, made by the command: a collection frees it
del cycle
print(json.dumps({"frozen": frozen, "enabled": gc.isenabled(), "freed": gc.collect() > 0,
                  "modules": len(sys.modules)}))
"""
    )
    assert found["enabled"] is True and found["freed"] is True
    assert isinstance(found["frozen"], int) and isinstance(found["modules"], int)
    assert found["frozen"] > 20 * found["modules"]  # the modules and what they built


def test_serving_freezes_once_more_after_the_modules_and_never_a_test_process_heap() -> None:
    found = _probe(
        """
import gc, json
from steelframe import collector
with collector.modules_loaded():
    import steelframe.commands.core
modules = gc.get_freeze_count()
app = [[n] for n in range(5000)]  # what the app's start-up builds
collector.tune_for_serving()
serving = gc.get_freeze_count()
later = [[] for _ in range(1000)]
collector.tune_for_serving()  # `dev` starting its app again
print(json.dumps({"modules": modules, "serving": serving, "again": gc.get_freeze_count()}))
"""
    )
    assert isinstance(found["modules"], int) and isinstance(found["serving"], int)
    assert found["modules"] > 10_000 and found["serving"] >= found["modules"] + 5000
    assert found["again"] == found["serving"]
    # A process whose heap someone else froze (a test process: tests/gc_policy.py) keeps it.
    found = _probe(
        """
import gc, json
gc.freeze()
before = gc.get_freeze_count()
from steelframe import collector
with collector.modules_loaded():
    import steelframe.commands.core
loaded = gc.get_freeze_count()
collector.tune_for_serving()
print(json.dumps({"before": before, "loaded": loaded, "serving": gc.get_freeze_count()}))
"""
    )
    assert isinstance(found["before"], int) and isinstance(found["loaded"], int)
    assert isinstance(found["serving"], int)
    # Nothing more frozen (the count may fall: a frozen object that is freed leaves it), where
    # a freeze would have added the ~100,000 objects the import built.
    assert found["loaded"] <= found["before"] and found["serving"] <= found["before"]


def test_the_forking_worker_gives_the_modules_back_so_its_own_freeze_can_be_undone() -> None:
    """`steelframe worker` thaws before it forks: frozen_for_fork freezes the worker's heap for
    each fork and must undo it after, or the worker's objects would stay frozen (their
    garbage never collected) once a job had run."""
    found = _probe(
        """
import argparse, gc, json
from bot.heap_freeze import frozen_for_fork
from bot.stop_request import StopRequest
from steelframe import collector
with collector.modules_loaded():
    from steelframe.commands import worker
loaded = gc.get_freeze_count()
worker._context = lambda queue, **_: None  # stops `_work` right after its first step
code = worker._work(argparse.Namespace(queue=None), StopRequest())
thawed = gc.get_freeze_count()
with frozen_for_fork():
    during = gc.get_freeze_count()
print(json.dumps({"code": code, "loaded": loaded, "thawed": thawed, "during": during,
                  "after": gc.get_freeze_count()}))
"""
    )
    assert found["code"] == 2
    assert isinstance(found["loaded"], int) and found["loaded"] > 10_000
    assert found["thawed"] == 0 and found["during"] > 10_000 and found["after"] == 0


def test_a_heap_frozen_before_the_service_is_counted_once_however_many_commands_and_forks() -> None:
    """A test process freezes the heap its collection built (tests/gc_policy.py), and
    `gc.get_freeze_count()` walks every frozen object: asked at each in-process `cli.main`
    and each fork of an in-process worker, it took up to a second a call over a test
    process's heap. Asked once, then the record (bot/heap_freeze.py) answers, and what was
    frozen before stays frozen: nothing of the service's thaws it."""
    found = _probe(
        """
import contextlib, gc, io, json
kept = [[i] for i in range(50_000)]
gc.freeze()
before = gc.get_freeze_count()
asked = 0
count = gc.get_freeze_count
def counted():
    global asked
    asked += 1
    return count()
gc.get_freeze_count = counted
from bot.heap_freeze import frozen_for_fork
from steelframe import collector
from steelframe.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    codes = [main(["config", "--list"]) for _ in range(3)]
for _ in range(3):
    with frozen_for_fork():
        pass
collector.thaw()
collector.tune_for_serving()
print(json.dumps({"codes": codes, "asked": asked, "before": before, "after": count()}))
"""
    )
    assert found["codes"] == [0, 0, 0]
    assert found["asked"] == 1
    assert isinstance(found["before"], int) and found["before"] >= 50_000
    assert isinstance(found["after"], int) and found["after"] >= found["before"]
