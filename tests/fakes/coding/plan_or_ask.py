"""In plan mode (STEELFRAME_MODE=plan) reports a plan and changes nothing; in a coding run
asks a question that says it is a coding run and which Decision it was told (none on a first
run), so every coding run waits again and the question shows what kind of run asked it."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
if os.environ.get("STEELFRAME_MODE") == "plan":
    emit(
        type="result",
        status="done",
        summary="Files to change: export.py\nApproach: keep both formats\nRisks: none\n"
        "Test to run: pytest tests/test_export.py\nEstimate: 1 run",
    )
else:
    told = os.environ.get("STEELFRAME_DECISION") or "nothing"
    emit(type="result", status="question", question=f"Coding run, told {told}: which format?")
