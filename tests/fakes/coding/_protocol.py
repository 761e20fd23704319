"""What every scripted runtime does: read the prompt, speak JSON lines, commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


def read_prompt() -> str:
    prompt = sys.stdin.read()
    # The same prompt is also in the file the protocol names.
    assert Path(os.environ["STEELFRAME_PROMPT_FILE"]).read_text() == prompt
    return prompt


def commit(path: str, text: str, message: str) -> None:
    Path(path).write_text(text)
    subprocess.run(["git", "add", path], check=True)
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=Fake Coder",
            "-c",
            "user.email=coder@example.invalid",
            "commit",
            "--quiet",
            "-m",
            message,
        ],
        check=True,
    )
