"""Hangs: stores a session, starts a grandchild, writes both pids to ARG1, sleeps. The
grandchild carries ARG1 on its command line too, so a test can find both from the host."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
emit(type="session", session_id="sess-hang")
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]])
with open(sys.argv[1], "w") as pids:
    pids.write(f"{os.getpid()} {child.pid}\n")
time.sleep(600)
