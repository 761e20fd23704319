"""Works for ARG1 seconds (writing ARG2 when it starts), then commits and reports done."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
with open(sys.argv[2], "a") as started:
    started.write(f"{os.getpid()}\n")
time.sleep(float(sys.argv[1]))
commit("SLOW.md", "slow\n", "Slow change")
emit(type="result", status="done", summary="slow but done")
