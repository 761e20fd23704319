"""Prints a line of MIB mebibytes on stdout, then as much on stderr with no line break at
all (a progress bar redrawn with carriage returns), then commits a change and reports
done: what a runtime dumping a large file, or a chatty tool, prints. Args: MIB."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

size = int(sys.argv[1]) << 20
read_prompt()
sys.stdout.write("x" * size + "\n")
sys.stdout.flush()
for _ in range(size // 64):
    sys.stderr.write("\r[" + "#" * 60 + "]")
sys.stderr.flush()
commit("CHANGE.md", "A change.\n", "Make a change")
emit(type="result", status="done", summary="Done, after a lot of output.")
