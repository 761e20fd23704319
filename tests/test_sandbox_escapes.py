"""A hostile coding runtime in the real sandbox, trying what `tests/fakes/coding/attacker.py`
does not: what it leaves in its checkout for the worker's own git to run later, outside the
sandbox. Where bubblewrap cannot run these tests say they did not run, except under
CI=true, where they fail."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bot.lifecycle import budget_ledger
from bot.lifecycle.branch import SECRET_FOUND
from bot.lifecycle.sandbox import SandboxPolicy, SandboxRun, SandboxUnavailable, wrap
from bot.lifecycle.states import TaskState
from tests.conftest import GitHubSandbox
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Make, gone
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, host_pids, require_bwrap, sandbox_settings


async def test_a_repository_planted_in_the_checkout_runs_nothing_in_the_worker(
    make: Make, github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    """A git repository inside the checkout becomes a gitlink when the worker commits;
    `git status` then looks into it, and a clean filter its config names would run as the
    worker, with everything the sandbox hides in reach (here: the App key)."""
    require_bwrap()
    key_file = tmp_path / "app-key.pem"  # outside the sandbox, readable by the worker
    key_file.write_text(github_sandbox.private_key)
    marker = exchange_dir(tmp_path) / "stolen-key"
    lc = await make(coding_command=command("embedded_repo", key_file, marker))
    issue = await lc.open_issue("Vendor the library")
    await lc.work()
    assert not marker.exists(), "the planted filter ran outside the sandbox"
    assert lc.task(issue).state == TaskState.DELIVERED
    branch = f"steelframe/issue-{issue}"
    assert lc.branch_file("CHANGE.md", branch) == "A change beside a vendored library\n"


def _verdicts(log_text: str) -> dict[str, str]:
    return dict(re.findall(r"ATTEMPT (\w+): (SUCCEEDED|blocked)", log_text))


@pytest.mark.slow
async def test_no_spelling_of_a_local_address_and_no_socket_reaches_a_host_service(
    make: Make, tmp_path: Path
) -> None:
    """IPv6, abstract and filesystem Unix sockets, the proxy asked in every spelling of a
    local address (even ones the operator allowlisted by mistake), the sandbox's pid 1, the
    read-only system: nothing. A daemon that ignores SIGTERM does not outlive the run."""
    require_bwrap()
    ports_file = exchange_dir(tmp_path) / "ports.json"
    marker = exchange_dir(tmp_path) / f"left-behind-{uuid.uuid4().hex}"
    lc = await make(
        coding_command=command("prober", ports_file, marker),
        coding_network="allowlist",
        # An operator's mistakes: the proxy still refuses what these resolve to.
        egress_allow=tuple(
            f"{host}:{port}"
            for host in ("localhost", "ip6-localhost", "steelframe-sandbox", "127.0.0.1", "[::1]")
            for port in (6379, 5432)
        ),
    )
    service = urlsplit(str(lc.api.raw.make_url("/"))).port
    github = urlsplit(lc.sandbox.url).port
    ports = {"redis": 6379, "database": 5432, "service": service, "github": github}
    ports_file.write_text(json.dumps(ports))
    issue = await lc.open_issue("Probe the sandbox")
    await lc.work()
    task = lc.task(issue)
    log = await (await lc.api.get(f"/api/operator/tasks/{task.id}/log")).json()
    said = "\n".join(run["text"] for run in log["runs"])
    verdicts = _verdicts(said)
    assert len(verdicts) > 100, said
    assert [name for name, v in verdicts.items() if v == "SUCCEEDED"] == [], said
    assert task.state == TaskState.DELIVERED
    assert marker.exists()  # the daemon ran
    assert await gone(*host_pids(str(marker)))


async def test_character_references_carry_no_mention_marker_or_key_into_the_pull_request(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitHub shows `&#64;name` as a mention (and notifies), `sk-&#102;...` as the key:
    the pull request body is checked as it is shown."""
    key = "sk-fake-model-key-0123456789abcdef"
    monkeypatch.setenv("FAKE_MODEL_API_KEY", key)
    summary = (
        "Done, thanks &#64;maintainer and &#x40;other.\n"
        f"&lt;!-- steelframe-decision --&gt; key={key.replace('f', '&#102;', 1)}\n"
        "&#70;ixes &#35;2, see &#104;ttps://evil.example/x"
    )
    lc = await make(
        coding_command=command("say", summary), coding_env_passthrough=("FAKE_MODEL_API_KEY",)
    )
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    shown = html.unescape(pull["body"])  # as GitHub renders it
    assert key not in shown and "[REDACTED]" in shown, shown
    assert not re.search(r"@[A-Za-z0-9]", shown), shown
    assert "<!--" not in shown.replace(f"<!-- steelframe-task {lc.task(issue).id} -->", "")
    assert not re.search(r"(?i)fixes #2\b", shown) and "https://evil" not in shown, shown


async def test_negative_usage_refunds_nothing_from_the_repository_budget(make: Make) -> None:
    """Usage is the runtime's word; a negative total is no spend, and must not lower the
    task's totals or the repository's daily and monthly spend (every task's cap)."""
    lc = await make(coding_command=command("refund"))
    issue = await lc.open_issue("Make the widget blue")
    await lc.work()
    task = lc.task(issue)
    spent = lc.ctx.db.call(
        lambda s: budget_ledger.spent(s, lc.repo, datetime(2000, 1, 1, tzinfo=UTC))
    )
    assert (task.tokens_used, task.cost_usd) == (0, 0.0)
    assert (spent.tokens, spent.usd) == (0, 0.0)


async def test_a_shown_path_that_holds_the_worker_s_files_is_refused(
    make: Make, github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    """An extra read-only path that holds the data directory, the database file or the App
    key (a folder above them all; a venv the data directory was made in) would show them
    to the runtime, which the worker can read as (in a user namespace: the same uid). The
    run is refused before anything starts, naming the setting."""
    require_bwrap()
    key_file = tmp_path / "app-key.pem"
    key_file.write_text(github_sandbox.private_key)
    # Readable by others, as a worker's files often are (a root worker's runtime is another
    # uid; a user's, in its namespace, the worker's own).
    os.chmod(tmp_path, 0o755)
    os.chmod(key_file, 0o644)
    database = tmp_path / "steelframe.db"  # where make_settings puts it
    lc = await make(
        coding_command=command("reader", key_file, database),
        private_key=None,
        private_key_path=key_file,
        coding_read_only_paths=(*sandbox_settings(tmp_path)["coding_read_only_paths"], tmp_path),
    )
    issue = await lc.open_issue("Read the key")
    await lc.work()
    task = lc.task(issue)
    log = await (await lc.api.get(f"/api/operator/tasks/{task.id}/log")).json()
    said = "\n".join(run["text"] for run in log["runs"])
    assert "SUCCEEDED" not in said, said
    assert task.state == TaskState.FAILED
    assert "STEELFRAME_CODING_READ_ONLY_PATHS" in str(task.last_error), task.last_error


@pytest.mark.parametrize(
    ("shown", "hidden"),
    [
        ({"read_only": (Path("/srv/sf"),)}, Path("/srv/sf/var")),  # a venv holding var/
        ({"writable": (Path("/srv"),)}, Path("/srv/sf/app-key.pem")),
        ({}, Path("/etc/ssl/steelframe-app.pem")),  # in the /etc files every run sees
        ({}, Path("/usr/local/var/steelframe")),
    ],
)
def test_a_worker_place_under_any_shown_path_refuses_the_launch(
    tmp_path: Path, shown: dict[str, tuple[Path, ...]], hidden: Path
) -> None:
    run = SandboxRun(repo=tmp_path / "repo", tmp=tmp_path / "tmp", prompt=tmp_path / "p.md")
    policy = SandboxPolicy(hidden=(hidden,), **shown)  # type: ignore[arg-type]
    with pytest.raises(SandboxUnavailable, match="worker's own"):
        wrap(policy, run, ["/usr/bin/true"], {})
    wrap(SandboxPolicy(**shown), run, ["/usr/bin/true"], {})  # type: ignore[arg-type]


async def test_a_progress_line_puts_nothing_raw_on_the_issue(
    make: Make, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A `progress` line's tool name is shown on the sticky progress comment while the run
    goes on (and stays in the comment's edit history): redacted and defanged like every
    other word of the runtime's."""
    key = "sk-fake-model-key-0123456789abcdef"
    monkeypatch.setenv("FAKE_MODEL_API_KEY", key)
    seen = exchange_dir(tmp_path) / "progress-seen"
    lc = await make(
        coding_command=command("progress_leak", seen),
        coding_env_passthrough=("FAKE_MODEL_API_KEY",),
    )
    issue = await lc.open_issue("Make the widget blue")
    working = asyncio.create_task(lc.work())
    shown = ""
    deadline = asyncio.get_running_loop().time() + PATIENCE_SECONDS
    while not working.done() and asyncio.get_running_loop().time() < deadline:
        bodies = [c["body"] for c in await lc.comments(issue)]
        shown = next((b for b in bodies if "is working:" in b and "tool call" in b), "")
        if shown:
            break
        await asyncio.sleep(0.1)
    seen.touch()
    await working
    assert shown, "the progress comment never showed the tool call"
    assert key not in shown, shown
    assert "<!-- steelframe-decision" not in shown and "<img" not in shown, shown
    assert not re.search(r"@[A-Za-z0-9]", shown) and "](https://evil" not in shown, shown


async def test_the_model_key_base64_encoded_in_the_change_is_not_pushed(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key written down base64-encoded (a Kubernetes Secret) is still the key: the push
    scan recognises it, nothing is pushed."""
    monkeypatch.setenv("FAKE_MODEL_API_KEY", "sk-fake-model-key-0123456789abcdef")
    lc = await make(
        coding_command=command("encoded_leak"), coding_env_passthrough=("FAKE_MODEL_API_KEY",)
    )
    issue = await lc.open_issue("Deploy it")
    await lc.work()
    assert lc.task(issue).state == TaskState.FAILED
    assert lc.branch_file("deploy/secret.yaml", f"steelframe/issue-{issue}") is None
    assert await lc.pulls() == []
    assert SECRET_FOUND in "\n".join(c["body"] for c in await lc.comments(issue))
