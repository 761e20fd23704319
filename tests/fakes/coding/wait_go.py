"""Writes ARG1 when it starts, waits (at most ten minutes) for ARG2 to exist, then commits
a change and reports done: a runtime a test can hold while it stalls the worker."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
emit(type="session", session_id="sess-wait")
with open(sys.argv[1], "w") as started:
    started.write(f"{os.getpid()}\n")
deadline = time.monotonic() + 600
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
commit("LATE.md", "written after the lease was lost\n", "Late change")
emit(type="usage", input_tokens=10, output_tokens=10, cost_usd=0.5)
emit(type="result", status="done", summary="Done, late.")
