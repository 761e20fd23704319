"""First run: writes its pid to ARG1 and sleeps (the test kills its worker). Later runs:
commit a change and report done."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
marker = sys.argv[1]
if not os.path.exists(marker):
    emit(type="session", session_id="sess-crash")
    with open(marker, "w") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(600)
commit("RECOVERED.md", "done after a crash\n", "Recovered run")
emit(type="result", status="done", summary="Done on the second attempt.")
