"""Delivers like `commit`; on a review run it changes nothing and answers every thread with
status ARGV[1] and text ARGV[2] (what a hostile or mistaken agent may claim)."""

import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

prompt = read_prompt()
issue = os.environ["STEELFRAME_ISSUE"]
threads = re.findall(r'^<review-thread id="([^"]+)"', prompt, re.MULTILINE)
if not threads:
    commit("CHANGE.md", f"Change for issue {issue}\n", f"Fix issue {issue}")
    emit(type="result", status="done", summary=f"Added CHANGE.md for #{issue}.")
    raise SystemExit(0)
status, text = sys.argv[1], sys.argv[2]
answers = Path(".steelframe/review-answers.json")
answers.parent.mkdir(exist_ok=True)
entries = [{"thread": t, "status": status, "text": text} for t in threads]
answers.write_text(json.dumps({"threads": entries}))
emit(type="result", status="done", summary=f"Answered the review of #{issue}.")
