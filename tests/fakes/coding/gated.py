"""Works until the file ARG1 exists (writing ARG2 when it starts), then commits and reports
done: a run that lasts exactly as long as the test needs, whatever the machine's load."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
with open(sys.argv[2], "a") as started:
    started.write(f"{os.getpid()}\n")
deadline = time.monotonic() + 600
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
commit("GATED.md", "gated\n", "Gated change")
emit(type="result", status="done", summary="done when told")
