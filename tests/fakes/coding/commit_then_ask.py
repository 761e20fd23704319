"""Works in two parts with a question between: commits COMMITTED.md itself, leaves
UNCOMMITTED.md uncommitted, and asks. Its continuation (a Decision) writes SEEN.md saying
which of the two its tree holds, and their text, then reports done. ARG1 changes the first
run:
`quiet`: it changes nothing and asks;
`tested`: it reports done instead, and asks, changing nothing, when it is given a failed
test run to fix (the repository's test command, docs/repository-config.md);
`fail`: it exits with status 3 instead of asking;
`hold STARTED`: before asking it writes STARTED and waits (at most ten minutes)."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if os.environ.get("STEELFRAME_DECISION") is not None:
    seen = [
        f"{name}: {Path(name).read_text().strip() if Path(name).exists() else 'missing'}"
        for name in ("COMMITTED.md", "UNCOMMITTED.md")
    ]
    Path("SEEN.md").write_text("\n".join(seen) + "\n")
    emit(type="result", status="done", summary="Part two done.")
    sys.exit(0)
if "<test-output>" in prompt or mode == "quiet":
    emit(type="result", status="question", question="The tests fail: go on?")
    sys.exit(0)
commit("COMMITTED.md", "committed by the runtime\n", "Part one, committed")
Path("UNCOMMITTED.md").write_text("left uncommitted\n")
if mode == "tested":
    emit(type="result", status="done", summary="Part one done.")
elif mode == "fail":
    print("fatal: part two is broken", file=sys.stderr, flush=True)
    sys.exit(3)
else:
    if mode == "hold":
        Path(sys.argv[2]).write_text("started\n")
        time.sleep(600)
    emit(type="result", status="question", question="Part one is done: go on?")
