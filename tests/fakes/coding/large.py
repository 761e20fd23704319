"""Writes large files, sparse (no disk used, nothing held in memory): each argument is
`PATH:BYTES`. Then reports the work done, as a runtime that made a huge change would."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
for spec in sys.argv[1:]:
    path, _, size = spec.rpartition(":")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as out:
        out.truncate(int(size))
emit(type="result", status="done", summary="Added the generated data.")
