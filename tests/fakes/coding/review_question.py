"""Delivers like `commit`; a review run writes ARGV[1], waits (at most ten minutes) for
ARGV[2] to exist, then stops with a question (CodingStatus.QUESTION), changing nothing."""

import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
issue = os.environ["STEELFRAME_ISSUE"]
if not re.search(r'^<review-thread id="', prompt, re.MULTILINE):
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
    raise SystemExit(0)
Path(sys.argv[1]).write_text(f"{os.getpid()}\n")
deadline = time.monotonic() + 600
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
emit(type="result", status="question", question="Which blue did the reviewer mean?")
