"""What the fake agents share: the scenario named in the prompt, NDJSON output."""

from __future__ import annotations

import json
import os
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


def transcript(name: str) -> list[str]:
    """The verbatim lines of a documented transcript kept next to the fakes."""
    here = os.path.dirname(os.path.realpath(__file__))
    with open(os.path.join(here, name), encoding="utf-8") as lines:
        return [line.rstrip("\n") for line in lines if line.strip()]
