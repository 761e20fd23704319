"""The sandbox itself (bot.lifecycle.sandbox) around a real process: what it sees, what
it is given, its limits, and no network when the operator says so; and the redaction
of known secret values (bot.lifecycle.redact)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from bot.config import Settings
from bot.config_values import Secret
from bot.lifecycle import redact, run_cgroup
from bot.lifecycle.coding import CodingRequest, CodingStatus, run_coding
from bot.lifecycle.redact import MASK, Redactor
from bot.lifecycle.sandbox import (
    INSTALL_HINT,
    Network,
    SandboxPolicy,
    SandboxRun,
    SandboxUnavailable,
    wrap,
)
from tests.fakes.sandbox import require_bwrap

PROBE = r"""
import json, os, resource, socket, subprocess, sys
seen = {
    "cwd": os.getcwd(),
    "env": sorted(os.environ),
    "uid": os.getuid(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "root": sorted(os.listdir("/")),
    "etc_shadow": os.path.exists("/etc/shadow"),
    "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
    "data": resource.getrlimit(resource.RLIMIT_DATA)[0],
    "prompt": open(os.environ["STEELFRAME_PROMPT_FILE"]).read(),
}
try:
    socket.create_connection(("127.0.0.1", 6379), timeout=2).close()
    seen["redis"] = "connected"
except OSError as exc:
    seen["redis"] = type(exc).__name__
try:
    bytearray(256 * 1024 * 1024)
    seen["big_allocation"] = "allowed"
except MemoryError:
    seen["big_allocation"] = "refused"
children = []
try:
    for _ in range(40):
        children.append(subprocess.Popen(["sleep", "5"]))
    seen["forks"] = len(children)
except OSError:
    seen["forks"] = len(children)
for child in children:
    child.kill()
open("written.txt", "w").write("ok")
print(json.dumps({"type": "result", "status": "done", "summary": json.dumps(seen)}))
"""


async def _probe(tmp_path: Path, policy: SandboxPolicy) -> dict[str, object]:
    repo, folder = tmp_path / "run" / "repo", tmp_path / "run"
    repo.mkdir(parents=True)
    (tmp_path / "run" / "git").mkdir()  # the worker's git directory, beside the tree

    async def nothing(*args: object) -> None:
        return None

    outcome = await run_coding(
        CodingRequest(
            command=[sys.executable, "-c", PROBE],
            run=SandboxRun(repo=repo, tmp=folder / "tmp", prompt=folder / "prompt.md"),
            prompt="the prompt",
            time_limit=60,
            task_env={"STEELFRAME_TASK_ID": "7"},
            policy=policy,
        ),
        stop=asyncio.Event(),
        on_start=nothing,
        on_session=nothing,
        on_usage=lambda tokens, cost: None,
    )
    assert outcome.status == CodingStatus.DONE, outcome.log.text()
    assert (repo / "written.txt").read_text() == "ok"  # its repository copy is writable
    return dict(json.loads(outcome.summary))


def _policy(**overrides: object) -> SandboxPolicy:
    values: dict[str, object] = {
        "read_only": (Path(sys.prefix), Path(sys.base_prefix)),
        "memory_mb": 128,
        "max_processes": 16,
        "network": Network.OFF,
        "env_passthrough": ("MODEL_KEY",),
    }
    values.update(overrides)
    return SandboxPolicy(**values)  # type: ignore[arg-type]


async def test_the_runtime_sees_only_its_copy_a_private_tmp_and_a_read_only_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bwrap()
    monkeypatch.setenv("MODEL_KEY", "sk-model")
    monkeypatch.setenv("WEBHOOK_SECRET", "hook-secret")
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", "postgresql://u:pw@db/x")
    seen = await _probe(tmp_path, _policy())
    assert seen["cwd"] == "/workspace" and seen["prompt"] == "the prompt"
    env = set(seen["env"])  # type: ignore[arg-type]
    assert "MODEL_KEY" in env and not {"WEBHOOK_SECRET", "STEELFRAME_DATABASE_URL"} & env
    assert env <= {
        "PATH", "PWD", "HOME", "TMPDIR", "LANG", "LANGUAGE", "TZ", "TERM", "MODEL_KEY",
        "STEELFRAME_TASK_ID", "STEELFRAME_PROMPT_FILE",
    } | {name for name in env if name.startswith("LC_")}  # fmt: skip
    assert len(seen["pids"]) < 6  # type: ignore[arg-type]  # its own processes only
    assert seen["uid"] != 0 and seen["etc_shadow"] is False
    assert "git" not in seen["root"] and "var" not in seen["root"]  # type: ignore[operator]
    assert seen["redis"] == "ConnectionRefusedError"  # its own loopback: no Redis there
    assert seen["data"] == 128 * 1024 * 1024
    # The run's process limit: its cgroup's pids.max where runs get one, else RLIMIT_NPROC
    # (which counts every process of the uid); a fork bomb stops at it either way.
    assert run_cgroup.status().per_run or seen["nproc"] == 16
    assert seen["big_allocation"] == "refused"
    assert seen["forks"] < 16  # type: ignore[operator]


async def test_with_the_allowlist_network_the_host_loopback_is_not_reachable(
    tmp_path: Path,
) -> None:
    require_bwrap()
    seen = await _probe(tmp_path, _policy(network=Network.ALLOWLIST, memory_mb=1024))
    assert seen["redis"] == "ConnectionRefusedError"  # its own loopback, whatever the mode
    assert {"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"} <= set(seen["env"])  # type: ignore[arg-type]


def test_a_command_outside_the_read_only_system_is_refused_with_the_setting_to_use(
    tmp_path: Path,
) -> None:
    run = SandboxRun(repo=tmp_path, tmp=tmp_path / "tmp", prompt=tmp_path / "p")
    with pytest.raises(SandboxUnavailable, match="STEELFRAME_CODING_READ_ONLY_PATHS"):
        wrap(SandboxPolicy(), run, ["/opt/agent/bin/agent"], {})
    with pytest.raises(ValueError):
        wrap(SandboxPolicy(), run, [], {})


def test_without_bwrap_the_message_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    run = SandboxRun(repo=tmp_path, tmp=tmp_path / "tmp", prompt=tmp_path / "p")
    with pytest.raises(SandboxUnavailable) as raised:
        wrap(SandboxPolicy(), run, ["/usr/bin/true"], {})
    assert "apt-get install bubblewrap" in str(raised.value) and INSTALL_HINT in str(raised.value)
    off = wrap(SandboxPolicy(enabled=False), run, ["/usr/bin/true"], {})
    assert off.sandboxed is False and off.warnings  # explicit, and said at every run


def test_known_secret_values_are_redacted_and_public_text_is_flattened() -> None:
    redactor = Redactor(["sk-model-key-1234", "short"])
    redactor.add("ghs_token_abcdefgh")
    text = "key sk-model-key-1234, token ghs_token_abcdefgh, short stays"
    assert redactor.redact(text) == f"key {MASK}, token {MASK}, short stays"
    assert redactor.contains_secret(b"x ghs_token_abcdefgh y")
    public = redactor.public_text("<!-- steelframe-decision -->\n@alice sk-model-key-1234")
    assert public == f"steelframe-decision @\u200balice {MASK}"
    assert redactor.redact_data({"a": ["sk-model-key-1234"]}) == {"a": [MASK]}


def test_the_settings_secrets_and_the_passed_keys_are_known(tmp_path: Path) -> None:
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
    settings = Settings.from_env(
        {},
        defaults={
            "webhook_secret": Secret("hook-secret-value"),
            "private_key": Secret(pem),
            "database_url": "postgresql://steelframe:db-password-1@db/x",
            "redis_url": "redis://:redis-password-1@redis:6379/0",
            "coding_env_passthrough": ("MODEL_KEY",),
            "data_dir": tmp_path,
        },
    )
    redactor = redact.from_settings(settings, {"MODEL_KEY": "sk-model-key-99"})
    text = f"hook-secret-value db-password-1 redis-password-1 sk-model-key-99 {body}"
    assert redactor.redact(text) == " ".join([MASK] * 5)
