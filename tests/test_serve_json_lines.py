"""`steelframe serve` with STEELFRAME_LOG_FORMAT=json writes only JSON lines, on standard
output too: where it listens is a record with the address as its `url` field (it was a plain
`url: ...` line, and with `--processes` a plain line of its own as well), which
`steelframe.listening.announced_url` reads as it reads the plain line of text mode."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from steelframe.listening import announced_url
from tests.fakes.serve_process import serve_popen

pytestmark = pytest.mark.slow  # real serve processes


def _until_url(process: subprocess.Popen[str]) -> tuple[str, list[str]]:
    """The announced URL and the standard output lines up to it (it included)."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if (url := announced_url(line)) is not None:
            return url, lines
    raise AssertionError(f"serve announced no url (exit {process.wait(30)}): {lines}")


def _healthy(url: str) -> bool:
    """/healthz answers 200 within a minute (`--processes`' parent says where before its
    children listen)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=30) as response:
                return response.status == 200
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=90)


def _json_lines(text: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON log line: {line!r}") from None
    return found


def test_serve_in_json_mode_announces_its_url_as_a_json_record(tmp_path: Path) -> None:
    process = serve_popen(tmp_path, STEELFRAME_LOG_FORMAT="json")
    try:
        url, said = _until_url(process)
        assert url.startswith("http://127.0.0.1:") and _healthy(url)
    finally:
        stdout, stderr = _stop(process)
    records = _json_lines("".join(said) + stdout) + _json_lines(stderr)
    [announced] = [record for record in records if "url" in record]
    assert announced["url"] == url and announced["level"] == "info"
    assert {"time", "logger", "message"} <= set(announced)


def test_serve_in_text_mode_still_says_url_on_a_line_of_its_own(tmp_path: Path) -> None:
    process = serve_popen(tmp_path)
    try:
        url, said = _until_url(process)
        assert said[-1] == f"url: {url}\n" and _healthy(url)
    finally:
        _stop(process)


def test_serve_processes_in_json_mode_write_only_json_lines(tmp_path: Path, redis_url: str) -> None:
    process = serve_popen(
        tmp_path,
        "--processes",
        "2",
        STEELFRAME_LOG_FORMAT="json",
        STEELFRAME_REDIS_URL=redis_url,
    )
    try:
        url, said = _until_url(process)
        assert _healthy(url)
    finally:
        stdout, stderr = _stop(process)
    records = _json_lines("".join(said) + stdout) + _json_lines(stderr)
    [announced] = [record for record in records if "url" in record]
    assert announced["url"] == url and announced["processes"] == "2"
    assert any("2 processes sharing port" in record["message"] for record in records)
