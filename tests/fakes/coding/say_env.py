"""Commits one change and reports it done with the value of each variable named in argv, as
its environment has it: the summary is `NAME=value` per name (`NAME unset` where it is not
set), one per line."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

read_prompt()
commit("CHANGE.md", "A change.\n", "Make a change")
said = [
    f"{name}={os.environ[name]}" if name in os.environ else f"{name} unset" for name in sys.argv[1:]
]
emit(type="result", status="done", summary="\n".join(said))
