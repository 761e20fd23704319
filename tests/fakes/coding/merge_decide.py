"""Commits one change for an issue (CHANGE.md); given merge conflicts to resolve without a
Decision, stops as argv[1] says: `ask` asks a question, `limit` stops at a token limit of
its own (the task then waits on its budget), `idle` changes nothing (the markers stay).
Given them with a Decision, resolves every conflicted file (its text without markers) and
leaves the prompt it got in UPDATE_PROMPT.md, uncommitted: the worker concludes the merge."""

import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
issue = os.environ["STEELFRAME_ISSUE"]
decision = os.environ.get("STEELFRAME_DECISION")
conflicts = re.search(r"<merge-conflicts>\n(.*?)\n</merge-conflicts>", prompt, re.DOTALL)
if conflicts is None:
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
elif decision:
    for line in conflicts.group(1).splitlines():
        Path(json.loads(line)).write_text(f"Both sides, as the Decision said: {decision}\n")
    Path("UPDATE_PROMPT.md").write_text(prompt)
    emit(type="result", status="done", summary="Resolved the conflicts as the Decision said.")
elif sys.argv[1] == "ask":
    emit(type="result", status="question", question="Whose text should CHANGE.md keep?")
elif sys.argv[1] == "limit":
    emit(type="usage", input_tokens=2500, output_tokens=500, cost_usd=0.3)
    emit(type="result", status="error", error="stopped at my own limit", limit="tokens")
else:
    emit(type="result", status="done", summary="I cannot tell which side is right.")
