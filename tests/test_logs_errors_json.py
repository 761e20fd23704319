"""In JSON log mode, Python's own error output is a JSON record as well: an exception raised
where nothing can catch it (a finaliser; a weakref callback hit by SIGINT while a serve
process shut down, which once broke tests/test_serve_json_lines.py) and an uncaught one."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import dataclasses, sys
from bot.config import Settings
from steelframe.logs import configure_logging

configure_logging(dataclasses.replace(Settings(), log_format="json"))

class Finaliser:
    def __del__(self):
        raise KeyboardInterrupt  # as a signal landing in a finaliser

Finaliser()
raise RuntimeError("nothing caught this")
"""


def test_errors_nothing_catches_are_json_records_in_json_mode() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    records = [json.loads(line) for line in done.stderr.splitlines()]  # every line is JSON
    ignored, uncaught = records
    assert ignored["level"] == "error" and "Exception ignored" in ignored["message"]
    assert "KeyboardInterrupt" in ignored["exception"]
    assert uncaught["level"] == "critical" and "RuntimeError" in uncaught["message"]
    assert "nothing caught this" in uncaught["exception"]
