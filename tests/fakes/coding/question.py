"""First run: stores a session, asks a question. Continuation: writes what it was told
(and the session it resumed) into ANSWER.md, uncommitted, and reports done (and $0.42)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

prompt = read_prompt()
decision = os.environ.get("STEELFRAME_DECISION")
if decision is None:
    emit(type="session", session_id="sess-question-1", transcript="transcripts/q1.jsonl")
    with open("NOTES.md", "w") as notes:
        notes.write("half done\n")
    emit(type="result", status="question", question="Should the cache use Redis or SQLite?")
else:
    resumed = os.environ.get("STEELFRAME_RESUME_SESSION", "")
    transcript = os.environ.get("STEELFRAME_RESUME_TRANSCRIPT", "")
    with open("ANSWER.md", "w") as answer:
        answer.write(f"decision: {decision}\nsession: {resumed}\ntranscript: {transcript}\n")
        answer.write(f"prompt mentions decision: {decision in prompt}\n")
    emit(type="usage", input_tokens=2000, output_tokens=400, cost_usd=0.42)
    emit(type="result", status="done", summary="Applied the decision.")
