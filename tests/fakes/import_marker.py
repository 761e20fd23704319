"""A module that leaves a mark when it is imported or called: a test that names it in a job
hash shows the worker never imported what the hash named.

The mark's path comes from `STEELFRAME_TEST_IMPORT_MARK` (a worker process inherits it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

MARK = os.environ.get("STEELFRAME_TEST_IMPORT_MARK")
if MARK:
    Path(MARK).write_text("imported\n")


def touch(*args: Any, **kwargs: Any) -> None:
    if MARK:
        Path(MARK).with_suffix(".called").write_text("called\n")
