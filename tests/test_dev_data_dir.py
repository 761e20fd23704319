"""Dev's data folder as a newcomer meets it: `make run` twice (the second with PORT=) stops
the second before it shares the first one's database, Redis and sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from steelframe.dev import hold_data_dir, record_url


def run_dev(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEELFRAME_")}
    return subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "dev", "--port", "0", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_dev_on_the_same_data_folder_stops_before_any_start_up_work(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "var"
    first = hold_data_dir(folder)  # the running dev's hold (this process plays it)
    assert first is not None
    record_url(first, "http://127.0.0.1:8765")  # bound: the second one names where
    try:
        result = run_dev(tmp_path)
    finally:
        first.close()
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"steelframe: another steelframe dev (pid {os.getpid()}) runs on the data folder "
        f"{folder} at http://127.0.0.1:8765: use that one (its URL and token are in its "
        "terminal; the token is also "
        f"in {folder / 'dev-token'}), stop it first, or give this one a folder and a port of "
        "its own: steelframe dev --data-dir DIR --port PORT (make run DATA_DIR=DIR PORT=PORT)"
    )
    # Nothing of the first one's touched: no database, Redis or sandbox of a second.
    assert sorted(path.name for path in folder.iterdir()) == ["dev.lock"]
    again = hold_data_dir(folder)  # the first one gone, its folder is free again
    assert again is not None
    again.close()


def test_a_data_folder_that_cannot_be_made_is_one_line_naming_the_option(tmp_path: Path) -> None:
    result = run_dev(tmp_path, "--data-dir", "/proc/steelframe-nowhere/var")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "steelframe: cannot make the data folder /proc/steelframe-nowhere/var: No such file or "
        "directory. Check --data-dir: the user running dev must be able to write there."
    )
