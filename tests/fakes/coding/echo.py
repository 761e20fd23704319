"""Commits the prompt it got (PROMPT.md), so a test can read what the worker sent."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
commit("PROMPT.md", prompt, "Record the prompt")
emit(type="result", status="done", summary="Echoed the prompt into PROMPT.md.")
