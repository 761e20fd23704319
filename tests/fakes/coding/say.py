"""Commits one change and reports it done with the summary it was given (argv[1]): what a
runtime writes into the pull request body."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
commit("CHANGE.md", "A change.\n", "Make a change")
emit(type="result", status="done", summary=sys.argv[1])
