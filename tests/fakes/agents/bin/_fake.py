"""What the fake agents share: the scenario named in the prompt, NDJSON output."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

_SCENARIO = re.compile(r"scenario:([a-z_]+)")


def scenario(prompt: str) -> str:
    found = _SCENARIO.search(prompt)
    return found.group(1) if found else "success"


def line(obj: Any) -> None:
    """One JSON line, written with the key order as given (as the real CLIs do)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def fail(message: str, code: int) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    raise SystemExit(code)


def hang() -> None:
    while True:
        time.sleep(3600)
