"""Commits one change for an issue; given failing CI to fix, asks a question (so the fix
run ends without a fix); resumed by a Decision outside a fix run, changes nothing more and
reports done (the run delivers the branch as it is, its CI still red)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
if "<ci-evidence>" in prompt:
    emit(type="result", status="question", question="Is blue the widget's colour or a hex code?")
elif os.environ.get("STEELFRAME_DECISION"):
    emit(type="result", status="done", summary="Nothing to change on the branch.")
else:
    issue = os.environ["STEELFRAME_ISSUE"]
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
