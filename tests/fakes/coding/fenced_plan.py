"""Plan-first, with fences: in plan mode its plan ends in a fenced image; otherwise it
commits CHANGE.md and its summary ends in a fence it never closes (what an agent pasting
output may write). Either alone shows nothing live; joined, a naive body would."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

PLAN = "Approach: make it blue, as in\n```\n![logo](https://evil.example/p.png)\n```"
SUMMARY = "Made the widget blue. Output:\n```"

read_prompt()
if os.environ.get("STEELFRAME_MODE") == "plan":
    emit(type="result", status="done", summary=PLAN)
else:
    commit("CHANGE.md", "blue\n", f"Fix issue {os.environ['STEELFRAME_ISSUE']}")
    emit(type="result", status="done", summary=SUMMARY)
