"""The lifecycle benchmark's no-op coding runtime: the smallest change a PR can carry."""

import os
import sys

sys.stdin.read()
with open("NOOP.md", "w") as out:
    out.write(os.environ.get("STEELFRAME_TASK_ID", "") + "\n")
print('{"type": "result", "status": "done", "summary": "no-op"}', flush=True)
