"""A stop signalled while `steelframe dev` starts (Ctrl-C right after `make run`) ends it
once the step under way is done, saying so as serve does, with every part it started
stopped. Before, it ended silently, or printed the whole banner and then stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def test_a_ctrl_c_while_dev_starts_stops_every_part_and_says_so(tmp_path: Path) -> None:
    """As serve says it: Ctrl-C at `make run`'s first line ends dev once the step under way
    is done, with a line saying so, no banner, and no redis-server or sandbox left."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first == "steelframe dev: preparing the database ...\n", first
    process.send_signal(signal.SIGINT)
    rest, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    said = rest.splitlines()
    assert said[-1] == "steelframe dev: SIGINT while starting; stopped", rest
    assert not any(line.startswith(("url:", "token:", "Try it")) for line in said), rest
    assert "Traceback" not in stderr
    leftover = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and _cwd_of(pid).is_relative_to(tmp_path)
    ]
    assert leftover == []


def _cwd_of(pid: str) -> Path:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return Path("/")
