"""Commits one change for an issue; given failing CI to fix, commits its work so far and
asks a question (so the fix run waits for a person); resumed by a Decision in a fix run,
commits the fix; resumed by a Decision outside one, changes nothing more and reports done."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
issue = os.environ["STEELFRAME_ISSUE"]
decision = os.environ.get("STEELFRAME_DECISION")
if "<ci-evidence>" in prompt and decision:
    commit("FIX.md", prompt, f"Fix CI for issue {issue}")  # the prompt it fixed with
    emit(type="result", status="done", summary="Fixed the colour as the Decision said.")
elif "<ci-evidence>" in prompt:
    with open("WIP.md", "a") as wip:  # left in the tree: the worker commits and pushes it
        wip.write(f"Looked at the failure, attempt {os.environ['STEELFRAME_ATTEMPT']}\n")
    emit(type="result", status="question", question="Is blue the widget's colour or a hex code?")
elif decision:
    emit(type="result", status="done", summary="Nothing to change on the branch.")
else:
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
