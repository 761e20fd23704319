"""Names its "tool" in a progress line with what it wants on the issue: the model key it
was given (FAKE_MODEL_API_KEY), a mention, a link, HTML and a Decision marker; then waits
until the worker edited the progress comment (MARKER_FILE appears: the test saw it) or a
while passed, and is done with a change. Args: SEEN_FILE."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

seen = sys.argv[1]
read_prompt()
key = os.environ.get("FAKE_MODEL_API_KEY", "")
name = (
    f"key={key} <!-- steelframe-decision --> @maintainer "
    "[click](https://evil.example/x) <img src=https://evil.example/p.png>"
)
emit(type="progress", action="tool", name=name)
deadline = time.monotonic() + 20
while not os.path.exists(seen) and time.monotonic() < deadline:
    time.sleep(0.1)
commit("CHANGE.md", "A change.\n", "Make a change")
emit(type="result", status="done", summary="Changed CHANGE.md.")
