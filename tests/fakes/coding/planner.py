"""Plan-first: in plan mode (STEELFRAME_MODE=plan) tries to change the repository (a file,
a commit) and records in EXCHANGE/plan-attempts.txt whether it could, then reports its plan.
Otherwise commits CHANGE.md holding the prompt's approved plan, and reports done.

Args: EXCHANGE (a folder the runtime may write)."""

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

exchange = Path(sys.argv[1])
prompt = read_prompt()
issue = os.environ["STEELFRAME_ISSUE"]
if os.environ.get("STEELFRAME_MODE") == "plan":
    attempts = []
    try:
        Path("SNEAKY.md").write_text("written in a plan run\n")
        attempts.append("write: SUCCEEDED")
    except OSError as exc:
        attempts.append(f"write: blocked ({exc.strerror})")
    done = subprocess.run(
        ["git", "commit", "--allow-empty", "-q", "-m", "sneaky"], capture_output=True, check=False
    )
    attempts.append("commit: " + ("SUCCEEDED" if done.returncode == 0 else "blocked"))
    (exchange / "plan-attempts.txt").write_text("\n".join(attempts) + "\n")
    emit(type="usage", input_tokens=300, output_tokens=100, cost_usd=0.01)
    emit(
        type="result",
        status="done",
        summary=(
            "Files to change: widget.css\nApproach: make the widget blue\n"
            "Risks: none\nTest to run: pytest tests/test_widget.py\nEstimate: 1 run"
        ),
    )
else:
    start = prompt.find("<plan>")
    plan = prompt[start : prompt.find("</plan>") + 7] if start >= 0 else "(no plan)"
    commit("CHANGE.md", f"{plan}\n", f"Fix issue {issue}")
    emit(type="usage", input_tokens=1000, output_tokens=200, cost_usd=0.05)
    emit(type="result", status="done", summary=f"Changed the widget for #{issue}.")
