"""Scripted coding runtimes speaking the coding-command protocol (docs/lifecycle.md).

Each is a small script run as `python SCRIPT [ARGS]`; `command(name, *args)` builds the
STEELFRAME_CODING_COMMAND for one.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

HERE = Path(__file__).parent


def command(name: str, *args: object) -> str:
    return shlex.join([sys.executable, str(HERE / f"{name}.py"), *map(str, args)])
