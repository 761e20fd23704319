"""Holds the task's row lock, then hangs: a stand-in for a work horse frozen inside a write.

ARG1: file for this process's pid; ARG2: a libpq URL of the test database. The row lock is
taken in an open transaction (as a horse stopped mid-UPDATE would hold it) and kept until
this process dies; it runs in the horse's process group, so killing the run frees the row.
"""

import os
import sys
import time

import psycopg

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import emit, read_prompt

read_prompt()
emit(type="session", session_id="sess-hold-lock")
connection = psycopg.connect(sys.argv[2])
connection.execute("UPDATE tasks SET updated_at = updated_at")
with open(sys.argv[1], "w") as pids:
    pids.write(f"{os.getpid()}\n")
time.sleep(600)
