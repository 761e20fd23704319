"""A stop signalled while `steelframe serve` starts ends it cleanly once the step under way is
done, without listening; with `--processes`, a stop forwarded to children still starting
ends every process of the group the same way.

Before this, a child of `serve --processes` signalled during its start-up died wherever it
was (a KeyboardInterrupt traceback on standard error, in JSON mode too)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from bot.stop_request import stop_signals_blocked
from tests.fakes.serve_process import child_pids, serve_popen

pytestmark = pytest.mark.slow  # real serve processes

STOPS_WITHIN = 120.0  # start-up on a loaded 2-core machine, then the stop


def test_a_stop_sent_before_serve_is_up_stops_it_without_listening(tmp_path: Path) -> None:
    """As a supervisor starts a child: the signal sent at once waits, blocked, until serve
    holds it; serve then finishes starting its parts, stops them and never listens."""
    with stop_signals_blocked():
        process = serve_popen(tmp_path)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=STOPS_WITHIN)
    assert process.returncode == 0, stderr
    assert "steelframe serve: SIGINT while starting; stopped" in stdout.splitlines()
    assert "url:" not in stdout
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr


def test_processes_stopped_while_their_children_start_write_only_json_lines(
    tmp_path: Path, redis_url: str
) -> None:
    """The group is stopped the moment it has started its children, which are still
    importing: every child ends cleanly, and every line the group wrote is a JSON record."""
    process = serve_popen(
        tmp_path,
        "--processes",
        "2",
        STEELFRAME_LOG_FORMAT="json",
        STEELFRAME_REDIS_URL=redis_url,
    )
    deadline = time.monotonic() + STOPS_WITHIN
    while len(child_pids(process.pid)) < 2:  # started, and still importing
        assert process.poll() is None and time.monotonic() < deadline, "no children started"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=STOPS_WITHIN)
    assert process.returncode == 0, stderr
    lines = [*stdout.splitlines(), *stderr.splitlines()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON log line: {line!r}\n{stderr}") from None
    assert not [r for r in records if r.get("level") in ("error", "critical")], records
    stopped = [r for r in records if "while starting; stopped" in r.get("message", "")]
    assert len(stopped) == 2, records  # each child says it stopped while starting
