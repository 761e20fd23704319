"""Running it: /metrics scraped and parsed as Prometheus text, JSON logs that parse line by
line with request ids, the access log off by default, /readyz going 503 when Redis stops,
and `serve --processes 2` sharing one port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.config_values import Secret
from steelframe.embedded_redis import start_embedded_redis
from steelframe.listening import announced_url
from tests.conftest import ApiClient, GitHubSandbox, make_settings, read_sse
from tests.fakes.serve_process import child_pids, serve_popen


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_metrics_are_prometheus_text_with_chat_tasks_and_deliveries(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    api: ApiClient = await api_factory(
        github_sandbox.settings(tmp_path, redis_url=redis_url, metrics_token=Secret("scrape-me"))
    )
    github_sandbox.deliver_to(str(api.raw.make_url("/api/github/webhooks")))
    message = {"message": "file an issue for the flaky login test"}
    frames = await read_sse(await api.post("/api/operator/chat/stream", json=message))
    assert frames[-1]["type"] == "done" and frames[-1]["response"]["filed_issue_number"]
    await github_sandbox.settle()

    scrape = await api.raw.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert scrape.status == 200
    assert scrape.headers["Content-Type"].startswith("text/plain")
    found = samples(await scrape.text())
    assert found[("steelframe_chat_turns_total", (("outcome", "done"),))] == 1
    assert found[("steelframe_chat_first_frame_seconds_count", ())] == 1
    assert found[("steelframe_chat_streams_active", ())] == 0
    tasks = {
        state: found[("steelframe_tasks", (("state", state),))]
        for state in ("queued", "running", "waiting_for_info", "delivered", "failed", "terminated")
    }
    assert tasks == {**dict.fromkeys(tasks, 0.0), "queued": 1.0}  # the filed issue's task
    assert found[("steelframe_queue_depth", ())] == 1  # no worker runs here
    assert found[("steelframe_egress_blocked_requests", ())] == 0  # no run was refused a host
    assert found[("steelframe_webhook_deliveries", (("status", "processed"),))] >= 1  # the ping
    assert ("steelframe_webhook_processing_lag_seconds", ()) in found
    assert not any(name == "steelframe_scrape_errors_total" for name, _ in found)
    # The filing's GitHub calls: counted by status, and the installation's rate budget.
    created = ("steelframe_github_requests_total", (("method", "POST"), ("status", "201")))
    assert found[created] >= 1
    installation = str(github_sandbox.installation_id)
    budget = (
        "steelframe_github_rate_remaining",
        (("installation", installation), ("resource", "core")),
    )
    assert 0 < found[budget] < 5000


async def test_metrics_need_the_token_from_loopback_too(api_factory: Any, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, metrics_token=Secret("scrape-me"))
    api: ApiClient = await api_factory(settings)
    assert api.raw.server.host == "127.0.0.1"  # loopback: no privilege for it
    refused = await api.raw.get("/metrics")
    assert refused.status == 401 and (await refused.json())["code"] == "unauthorized"
    wrong = await api.raw.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status == 401
    allowed = await api.raw.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    assert allowed.status == 200


async def test_without_a_metrics_token_nobody_may_scrape(api: ApiClient) -> None:
    refused = await api.raw.get("/metrics")
    assert refused.status == 401
    assert (await refused.json())["detail"] == {"setting": "STEELFRAME_METRICS_TOKEN"}


async def test_readyz_is_503_naming_redis_when_it_stops(api_factory: Any, tmp_path: Path) -> None:
    embedded = start_embedded_redis(tmp_path / "redis")
    try:
        api: ApiClient = await api_factory(make_settings(tmp_path, redis_url=embedded.url))
        ready = await api.raw.get("/readyz")
        body = await ready.json()
        assert ready.status == 200 and body["status"] == "ready"
        assert set(body["checks"]) == {
            *("database", "redis", "index", "coding_sandbox", "coding_egress"),
            *("setup_cache", "run_limits", "sandbox_uids", "github_app", "webhook_secret"),
            "coding_runtime",
        }
    finally:
        embedded.stop()
    down = await api.raw.get("/readyz")
    body = await down.json()
    assert down.status == 503 and body["status"] == "not_ready"
    assert body["checks"]["redis"] == {
        "ok": False,
        "detail": "unreachable: check STEELFRAME_REDIS_URL",
    }
    assert body["checks"]["database"]["ok"] is True
    live = await api.raw.get("/healthz")
    assert live.status == 200  # liveness: restarting the process would not bring Redis back


def _url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    for line in process.stdout:
        if (url := announced_url(line)) is not None:  # a `url:` line or a JSON record
            return url
    raise AssertionError(f"serve printed no url (exit {process.wait(30)})")


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except urllib.error.URLError:  # not listening (yet, or any more)
        return 0, b""


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    return stderr


@pytest.mark.parametrize("access_log", ["", "true"])
@pytest.mark.slow
def test_json_logs_parse_line_by_line_with_request_ids(tmp_path: Path, access_log: str) -> None:
    env = {"LOG_FORMAT": "json"} | ({"STEELFRAME_ACCESS_LOG": access_log} if access_log else {})
    process = serve_popen(tmp_path, **env)
    try:
        url = _url(process)
        status, _ = _get(f"{url}/api/operator/sessions", {"X-Request-Id": "req-abc-123"})
        assert status == 401
    finally:
        stderr = _stop(process)
    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    refused = [line for line in lines if line.get("request_id") == "req-abc-123"]
    assert refused and "401" in refused[0]["message"]
    access = [line for line in lines if line["logger"] == "aiohttp.access"]
    assert bool(access) == bool(access_log)  # off unless asked for


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of a process's output as a JSON object (what a log pipeline, or
    `jq .`, needs of STEELFRAME_LOG_FORMAT=json); a line that is not one fails, naming it."""
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON log line: {line!r}") from None
    return lines


@pytest.mark.slow
def test_a_worker_with_json_logs_writes_only_json_lines(tmp_path: Path, redis_url: str) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("STEELFRAME_", "LOG_"))}
    environ["STEELFRAME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'ops.db'}"
    environ["STEELFRAME_DATA_DIR"] = str(tmp_path / "var")
    environ |= {"STEELFRAME_REDIS_URL": redis_url, "STEELFRAME_LOG_FORMAT": "json"}
    environ["STEELFRAME_TASK_QUEUE"] = f"json-logs-{os.getpid()}"
    run = subprocess.run(
        [sys.executable, "-m", "steelframe.cli", "worker", "--burst"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    said = _json_lines(run.stdout) + _json_lines(run.stderr)
    messages = [line["message"] for line in said]
    # The start-up narration and its warnings are records too, at their level.
    assert any("reconciling before work" in message for message in messages)
    assert any("listening on" in message for message in messages)
    warned = [line for line in said if "no coding agent configured" in line["message"]]
    assert warned and warned[0]["level"] == "warning"


@pytest.mark.slow
def test_serve_with_json_logs_says_what_is_not_ready_as_a_json_line(
    tmp_path: Path, github_sandbox: GitHubSandbox
) -> None:
    key = tmp_path / "app.pem"
    key.write_text(github_sandbox.private_key)
    app = {"APP_ID": "7", "PRIVATE_KEY_PATH": str(key), "GITHUB_API_URL": github_sandbox.url}
    process = serve_popen(tmp_path, LOG_FORMAT="json", **app)
    try:
        _url(process)
    finally:
        stderr = _stop(process)
    [warning] = [line for line in _json_lines(stderr) if "not ready" in line["message"]]
    assert warning["level"] == "warning"
    assert warning["message"] == (
        "not ready: WEBHOOK_SECRET missing: every webhook delivery is refused (503)"
    )


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[str]:
    embedded = start_embedded_redis(tmp_path / "redis")
    yield embedded.url
    embedded.stop()


@pytest.mark.slow
def test_two_processes_share_one_port_and_a_dead_one_is_replaced(
    tmp_path: Path, own_redis: str
) -> None:
    process = serve_popen(tmp_path, "--processes", "2", STEELFRAME_REDIS_URL=own_redis)
    try:
        url = _url(process)
        deadline = time.monotonic() + 60
        while _get(f"{url}/readyz")[0] != 200:
            assert time.monotonic() < deadline, "the processes never became ready"
            time.sleep(0.2)
        children = child_pids(process.pid)
        assert len(children) == 2
        os.kill(children[0], signal.SIGKILL)
        while set(child_pids(process.pid)) & {children[0]} or len(child_pids(process.pid)) < 2:
            assert time.monotonic() < deadline + 60, "the dead process was not replaced"
            time.sleep(0.2)
        while _get(f"{url}/readyz")[0] != 200:
            assert time.monotonic() < deadline + 60
            time.sleep(0.2)
    finally:
        _stop(process)
    assert process.returncode == 0


@pytest.mark.slow
def test_processes_without_redis_are_refused_with_a_reason(tmp_path: Path) -> None:
    process = serve_popen(tmp_path, "--processes", "2")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 2 and "--processes needs Redis" in stderr
