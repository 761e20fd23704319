"""Commits one change (CHANGE.md naming the issue) and reports it done."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
emit(type="session", session_id=f"commit-{os.environ['STEELFRAME_TASK_ID']}")
issue = os.environ["STEELFRAME_ISSUE"]
commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
emit(type="usage", input_tokens=120, output_tokens=30, cost_usd=0.001)
emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
