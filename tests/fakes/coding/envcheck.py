"""Looks for secrets the way a hostile agent would, then commits one change. Args: REPORT
MARKER... It writes REPORT (JSON): what setup left it (`.deps/`), where any MARKER (a part
of every secret's value) is in its environment or in a file it can read under the places it
can write or was given (the workspace, /tmp, /run, /etc, its home, the exchange folder),
and the prompt it got; and
adds a line to REPORT.runs. Given a failed test run to fix, it also commits FIXED.md."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

report, secrets = sys.argv[1], [s.encode() for s in sys.argv[2:]]
prompt = read_prompt()
found: list[str] = []
environ = "\0".join(f"{k}={v}" for k, v in os.environ.items()).encode()
if any(s in environ for s in secrets):
    found.append("environment")
try:
    if any(s in Path("/proc/self/environ").read_bytes() for s in secrets):
        found.append("/proc/self/environ")
except OSError:
    pass
places = {"/workspace", "/tmp", "/run", "/etc", os.environ.get("HOME", "/tmp")}
for top in places | {os.path.dirname(report)}:
    for folder, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            try:
                data = Path(path).read_bytes()
            except OSError:
                continue
            if any(s in data for s in secrets):
                found.append(path)
stamp, length = Path(".deps/stamp"), Path(".deps/secret-length")
Path(report).write_text(
    json.dumps(
        {
            "stamp": stamp.read_text() if stamp.is_file() else None,
            "secret_length": length.read_text() if length.is_file() else None,
            "found": found,
            "prompt": prompt,
        }
    )
)
fixing = "<test-output>" in prompt
with open(f"{report}.runs", "a") as runs:
    runs.write(json.dumps({"fixing": fixing}) + "\n")
issue = os.environ["STEELFRAME_ISSUE"]
if fixing:
    commit("FIXED.md", "Fixed what the tests said\n", "Fix the tests")
else:
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
