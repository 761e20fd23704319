"""Commits one change for an issue; given failing CI to fix, changes nothing and says why
(a fix run that changes nothing must stop, not push or loop)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
if "<ci-evidence>" in prompt:
    emit(type="result", status="done", summary="The failure is not in the code.")
else:
    issue = os.environ["STEELFRAME_ISSUE"]
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
