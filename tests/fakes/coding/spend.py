"""Reports ever more tokens (a runtime that would spend without end)."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
for step in range(1, 1000):
    emit(type="usage", input_tokens=step * 1000, output_tokens=0, cost_usd=step * 0.01)
    time.sleep(0.02)
