"""Fails: an error on stderr, exit status 3, no result. Counts its runs in ARG1."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import read_prompt

read_prompt()
with open(sys.argv[1], "a") as runs:
    runs.write(os.environ["STEELFRAME_ATTEMPT"] + "\n")
print("fatal: the build is broken", file=sys.stderr, flush=True)
sys.exit(3)
