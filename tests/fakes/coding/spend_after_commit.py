"""Commits WIP.md, then reports ever more tokens and cost (a run that would spend without
end after changing something): a budget must stop it with nothing pushed."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
commit("WIP.md", "half a change\n", "Half a change")
for step in range(1, 1000):
    emit(type="usage", input_tokens=step * 1000, output_tokens=0, cost_usd=step * 0.01)
    time.sleep(0.02)
