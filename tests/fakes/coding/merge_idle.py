"""Commits one change for an issue; given merge conflicts to resolve, changes nothing and
says so (an update run whose conflicts are left must not push, and must ask a person).
The file's name is the first argument (default CHANGE.md)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
name = sys.argv[1] if len(sys.argv) > 1 else "CHANGE.md"
if "<merge-conflicts>" in prompt:
    emit(type="result", status="done", summary="I cannot tell which side is right.")
else:
    issue = os.environ["STEELFRAME_ISSUE"]
    commit(name, f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added {name} for #{issue}.")
