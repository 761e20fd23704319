"""Asks two questions, one per run, then delivers: ROUND.md on the branch counts the
Decisions it got (the worker keeps the work so far for the continuation)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
decision = os.environ.get("STEELFRAME_DECISION")
rounds = 0
if os.path.exists("ROUND.md"):
    with open("ROUND.md") as kept:
        rounds = len(kept.read().splitlines())
if decision is not None:
    rounds += 1
with open("ROUND.md", "w") as record:
    record.write("".join(f"decision {n + 1}\n" for n in range(rounds)))
if rounds < 2:
    emit(type="result", status="question", question=f"Question {rounds + 1}: proceed?")
else:
    emit(type="result", status="done", summary=f"Applied {rounds} decisions.")
