"""Delivers like `commit`; on a review run it answers the review as ARGV[1] says:

fix      - edits CHANGE.md per the review, answers every thread `addressed`
nothing  - changes nothing, writes no answers
ask      - changes nothing, answers every thread with a `question` (fix once decided)
garbled  - edits CHANGE.md, writes an answers file the worker cannot read

With ARGV[2] and ARGV[3] a review run first writes ARGV[2] and waits (at most ten
minutes) for ARGV[3] to exist: a run a test holds while a person pushes.

It writes the session it was told to resume (STEELFRAME_RESUME_SESSION) into REVIEWED.md,
so a test sees which session the review run continued.
"""

import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
task = os.environ["STEELFRAME_TASK_ID"]
issue = os.environ["STEELFRAME_ISSUE"]
mode = sys.argv[1] if len(sys.argv) > 1 else "fix"
if mode == "ask" and os.environ.get("STEELFRAME_DECISION"):
    mode = "fix"  # the question was answered
threads = re.findall(r'^<review-thread id="([^"]+)"', prompt, re.MULTILINE)
emit(type="session", session_id=f"review-session-{task}")
if not threads:
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
    raise SystemExit(0)
if len(sys.argv) > 3:
    Path(sys.argv[2]).write_text(f"{os.getpid()}\n")
    deadline = time.monotonic() + 600
    while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
        time.sleep(0.05)
resumed = os.environ.get("STEELFRAME_RESUME_SESSION", "")
answers = Path(".steelframe/review-answers.json")
answers.parent.mkdir(exist_ok=True)
if mode in ("fix", "garbled"):
    Path("CHANGE.md").write_text(f"Change for issue {issue}, in a calmer blue\n")
    Path("REVIEWED.md").write_text(f"resumed {resumed}\nthreads {' '.join(threads)}\n")
if mode == "fix":
    entries = [{"thread": t, "status": "addressed", "text": "Made it calmer."} for t in threads]
    answers.write_text(json.dumps({"threads": entries}))
elif mode == "ask":
    entries = [{"thread": t, "status": "question", "text": "Which blue?"} for t in threads]
    answers.write_text(json.dumps({"threads": entries}))
elif mode == "garbled":
    answers.write_text('{"threads": [{"thread": 1, "status": "maybe"}]}')
emit(type="result", status="done", summary=f"Answered the review of #{issue}.")
