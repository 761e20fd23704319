"""The benchmark's no-op runtime: the smallest change that makes a pull request."""

import os
import subprocess

with open("TINY.md", "w") as out:
    out.write(os.environ["STEELFRAME_TASK_ID"] + "\n")
subprocess.run(["git", "add", "TINY.md"], check=True)
print('{"type": "result", "status": "done", "summary": "tiny"}', flush=True)
