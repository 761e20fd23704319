"""Prints COUNT session lines, each naming a new session with a transcript of SIZE
characters, as fast as the worker reads them; then commits a change and reports done.
What a hostile runtime does to fill the worker's database. Args: COUNT SIZE."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

count, size = int(sys.argv[1]), int(sys.argv[2])
read_prompt()
for index in range(count):
    emit(type="session", session_id=f"sess-{index}", transcript=f"{index:08d}" + "t" * size)
commit("CHANGE.md", "A change.\n", "Make a change")
emit(type="result", status="done", summary="Done.")
