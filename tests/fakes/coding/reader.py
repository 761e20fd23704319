"""Reads each file it is given (the worker's own: its App key, its database) and reports
`ATTEMPT read_<n>: SUCCEEDED (<bytes>)` or `blocked (<why>)`, then is done with a change.
Args: PATH..."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
for index, path in enumerate(sys.argv[1:]):
    try:
        with open(path, "rb") as handle:
            size = len(handle.read())
        print(f"ATTEMPT read_{index}: SUCCEEDED ({size} bytes of {path})", flush=True)
    except OSError as exc:
        print(f"ATTEMPT read_{index}: blocked ({type(exc).__name__})", flush=True)
commit("CHANGE.md", "A change.\n", "Make a change")
emit(type="result", status="done", summary="Read what it could.")
