"""Reports negative usage (a "refund" of tokens and dollars), commits a change and is done:
a runtime that would erase what other runs spent from the repository's budget."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
emit(type="usage", input_tokens=-5_000_000, output_tokens=-1, cost_usd=-250.0)
commit("CHANGE.md", "A change.\n", "Make a change")
emit(type="result", status="done", summary="Changed CHANGE.md.")
