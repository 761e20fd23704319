"""The garbage collector's policy in a serving process (steelframe/collector.py): start-up's
objects frozen once, full collections 100x rarer than CPython's default."""

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


def test_serving_freezes_start_up_once_and_collects_everything_less_often() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    found = json.loads(probe.stdout)
    young, middle, _ = found["default"]
    assert found["tuned"] == [young, middle, FULL_COLLECTION_AFTER]
    assert found["frozen"] > 1000  # the modules start-up imported, and what they built
    assert found["again"] == found["frozen"]
