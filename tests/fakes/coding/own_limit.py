"""Stops at a limit of its own (an agent's own token or cost cap, not Steelframe's): reports
what it spent, then a result of status error naming the limit (argv[1]: tokens or cost)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
emit(type="usage", input_tokens=2500, output_tokens=500, cost_usd=0.3)
emit(type="result", status="error", error="stopped at my own limit", limit=sys.argv[1])
