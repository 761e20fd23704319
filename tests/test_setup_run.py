"""The repository's environment in real runs (bwrap, RQ, the GitHub sandbox): its config
read from the base branch, setup run once in the sandbox and then restored from the cache,
setup-only secrets out of the agent's reach, the test command's result in the PR body, and
a wrong config failing the run before anything runs or is pushed."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from bot.lifecycle.models import EventKind, TaskLog
from bot.lifecycle.repo_tests import DRAFT_NOTE
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files, remote_refs
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import exchange_dir, require_bwrap

MARKER = "sfsetupsecret-"
SETUP = (
    "setup:\n"
    "  - mkdir -p .deps && date +%s%N > .deps/stamp\n"
    '  - printf %s "${#NPM_TOKEN}" > .deps/secret-length\n'
    "setup_secrets: [NPM_TOKEN]\n"
)


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def _secret_store(tmp_path: Path, value: str) -> Path:
    folder = tmp_path / "setup-secrets"
    (folder / "steelframe-dev").mkdir(parents=True)
    (folder / "steelframe-dev" / "sandbox.env").write_text(f"NPM_TOKEN={value}\n")
    return folder


async def _bench(make: Make, tmp_path: Path, **overrides: Any) -> tuple[Lifecycle, Path, str]:
    value = MARKER + secrets.token_hex(12)
    report = exchange_dir(tmp_path) / "report.json"
    lc = await make(
        coding_command=command("envcheck", report, MARKER),
        setup_secrets_dir=_secret_store(tmp_path, value),
        **overrides,
    )
    return lc, report, value


def _seed(lc: Lifecycle, files: dict[str, str]) -> None:
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, files)


def _notes(lc: Lifecycle, issue: int) -> list[str]:
    events = lc.events(lc.task(issue).id)
    return [e.detail for e in events if e.kind == EventKind.NOTE]


def _logs(lc: Lifecycle, issue: int) -> str:
    task_id = lc.task(issue).id
    rows = lc.ctx.db.call(lambda s: s.query(TaskLog).filter(TaskLog.task_id == task_id).all())
    return "\n".join(row.text for row in rows)


def _cached_entries(lc: Lifecycle) -> list[Path]:
    folder = lc.settings.data_dir / "setup-cache" / "steelframe-dev" / "sandbox"
    return [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []


async def _run_issue(lc: Lifecycle, title: str) -> int:
    issue = await lc.open_issue(title)
    await lc.work()
    return issue


async def test_setup_runs_once_then_the_cache_starts_the_next_run_until_a_key_file_changes(
    make: Make, tmp_path: Path
) -> None:
    lc, report, value = await _bench(make, tmp_path)
    rules = "Always run the linter before you finish."
    config = SETUP + "instructions: [AGENTS.md]\n"
    _seed(lc, {".steelframe/config.yml": config, "AGENTS.md": rules + "\n"})

    first = await _run_issue(lc, "First change")
    assert lc.task(first).state == TaskState.DELIVERED
    assert "setup: running 2 commands" in _notes(lc, first)
    seen = json.loads(report.read_text())
    assert seen["stamp"] and seen["secret_length"] == str(len(value))  # setup had the secret
    assert seen["found"] == []  # ... and the agent finds it nowhere
    assert rules in seen["prompt"]  # a command agent reads no AGENTS.md by itself
    branch = f"steelframe/issue-{first}"
    assert lc.branch_file("CHANGE.md", branch) is not None
    assert lc.branch_file(".deps/stamp", branch) is None  # what setup made is never pushed
    assert len(_cached_entries(lc)) == 1

    second = await _run_issue(lc, "Second change")
    assert lc.task(second).state == TaskState.DELIVERED
    notes = _notes(lc, second)
    assert "setup: cached" in notes and not any("running" in n for n in notes)
    again = json.loads(report.read_text())
    assert again["stamp"] == seen["stamp"] and again["found"] == []

    _seed(lc, {"requirements.txt": "requests==2.32.3\n"})  # a key file changes
    third = await _run_issue(lc, "Third change")
    assert lc.task(third).state == TaskState.DELIVERED
    assert "setup: running 2 commands" in _notes(lc, third)
    assert json.loads(report.read_text())["stamp"] != seen["stamp"]
    assert len(_cached_entries(lc)) == 2
    for issue in (first, second, third):
        assert value not in _logs(lc, issue)
        assert not any(value in c["body"] for c in await lc.comments(issue))


async def test_a_setup_that_writes_its_secret_into_the_workspace_is_refused_and_nothing_kept(
    make: Make, tmp_path: Path
) -> None:
    lc, report, value = await _bench(make, tmp_path)
    config = 'setup:\n  - printf %s "$NPM_TOKEN" > .npmrc-token\nsetup_secrets: [NPM_TOKEN]\n'
    _seed(lc, {".steelframe/config.yml": config})
    refs_before = remote_refs(lc.sandbox.sandbox.world.repo(lc.repo).git_path)

    issue = await _run_issue(lc, "Leaky setup")
    task = lc.task(issue)
    assert task.state == TaskState.FAILED
    assert task.last_error is not None and "setup was refused" in task.last_error
    assert not report.exists()  # the agent never ran
    assert _cached_entries(lc) == []
    private = _logs(lc, issue)
    assert ".npmrc-token" in private and value not in private
    comments = [c["body"] for c in await lc.comments(issue)]
    assert not any(value in body or ".npmrc-token" in body for body in comments)
    assert remote_refs(lc.sandbox.sandbox.world.repo(lc.repo).git_path) == refs_before
    assert await lc.pulls() == []


def _issue(pull: dict[str, Any]) -> int:
    return int(str(pull["head"]["ref"]).rsplit("-", 1)[1])


def _runs(report: Path) -> list[dict[str, Any]]:
    lines = Path(f"{report}.runs").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def _tested(make: Make, tmp_path: Path, test: str) -> tuple[Lifecycle, dict[str, Any], Path]:
    lc, report, _ = await _bench(make, tmp_path)
    _seed(lc, {".steelframe/config.yml": f"test: {json.dumps(test)}\n"})
    issue = await _run_issue(lc, "Tested change")
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    return lc, pull, report


async def test_passing_tests_are_said_in_the_pull_request_body(make: Make, tmp_path: Path) -> None:
    lc, pull, report = await _tested(make, tmp_path, "touch made-by-tests && test -f CHANGE.md")
    assert "Tests: `touch made-by-tests && test -f CHANGE.md` passed in " in pull["body"]
    assert pull["draft"] is False and len(_runs(report)) == 1
    branch = pull["head"]["ref"]
    assert lc.branch_file("made-by-tests", branch) is None  # what tests write is not pushed
    [tests] = [n for n in _notes(lc, _issue(pull)) if n.startswith("Tests:")]
    assert tests.startswith("Tests: `touch made-by-tests && test -f CHANGE.md` passed in ")
    [data] = [e.data for e in lc.events(lc.task(_issue(pull)).id) if e.data and "tail" in e.data]
    assert data["exit_code"] == "0" and data["memory_limit_mb"] is None  # not stopped by it


async def test_red_tests_give_the_agent_one_more_run_with_their_output(
    make: Make, tmp_path: Path
) -> None:
    lc, pull, report = await _tested(make, tmp_path, "touch made-by-tests; test -f FIXED.md")
    runs = _runs(report)
    assert [r["fixing"] for r in runs] == [False, True]  # the second saw the failure
    assert "Tests: `touch made-by-tests; test -f FIXED.md` passed in " in pull["body"]
    assert pull["draft"] is False
    branch = pull["head"]["ref"]
    assert lc.branch_file("FIXED.md", branch) and lc.branch_file("CHANGE.md", branch)
    assert lc.branch_file("made-by-tests", branch) is None
    tests = [n for n in _notes(lc, _issue(pull)) if n.startswith("Tests:")]
    assert len(tests) == 2 and "failed (exit 1)" in tests[0] and "passed" in tests[1]


async def test_tests_red_after_the_second_run_make_the_pull_request_a_draft(
    make: Make, tmp_path: Path
) -> None:
    lc, pull, report = await _tested(make, tmp_path, "echo broken >&2; exit 3")
    assert len(_runs(report)) == 2
    assert "Tests: `echo broken >&2; exit 3` failed (exit 3) in " in pull["body"]
    assert DRAFT_NOTE in pull["body"] and pull["draft"] is True
    board = (await (await lc.api.get("/api/operator/board")).json())["tasks"]
    assert [t["pr_state"] for t in board] == ["draft"]  # the Board card says so too
    prompt = json.loads(report.read_text())["prompt"]
    assert "<test-output>\nbroken\n</test-output>" in prompt


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ("setup: [npm ci\ntest: x\n", ".steelframe/config.yml is not valid YAML"),
        ("setpu: [npm ci]\n", "unknown field `setpu`"),
        ("network:\n  allow: ['127.0.0.1:6379']\n", "'127.0.0.1:6379' is a loopback address"),
        ("agent: codex\n", "does not let repositories choose"),
    ],
)
async def test_a_wrong_config_fails_the_run_with_one_line_and_nothing_runs_or_is_pushed(
    make: Make, tmp_path: Path, config: str, reason: str
) -> None:
    lc, report, _ = await _bench(make, tmp_path)
    _seed(lc, {".steelframe/config.yml": config})
    git_path = lc.sandbox.sandbox.world.repo(lc.repo).git_path
    branches_before = {r for r in remote_refs(git_path) if r.startswith("refs/heads/")}

    issue = await _run_issue(lc, "Change with a bad config")
    task = lc.task(issue)
    assert task.state == TaskState.FAILED
    assert task.last_error is not None and reason in task.last_error
    assert "\n" not in task.last_error
    assert task.attempts == 1  # not retried: the config will not fix itself
    assert not report.exists()  # no run started
    assert {r for r in remote_refs(git_path) if r.startswith("refs/heads/")} == branches_before
    assert await lc.pulls() == []
    assert any(reason in c["body"] for c in await lc.comments(issue))


async def test_a_failed_setup_is_shown_to_the_operator_only_and_redacted(
    make: Make, tmp_path: Path
) -> None:
    lc, report, value = await _bench(make, tmp_path, task_max_attempts=1)
    failing = 'echo "fetching with $NPM_TOKEN"; echo "E404 left-pad not found" >&2; exit 7'
    config = f"setup:\n  - {json.dumps(failing)}\nsetup_secrets: [NPM_TOKEN]\n"
    _seed(lc, {".steelframe/config.yml": config})

    issue = await _run_issue(lc, "Broken setup")
    task = lc.task(issue)
    assert task.state == TaskState.FAILED and not report.exists()
    assert task.last_error is not None
    assert "setup command 1 of 1 failed (exit 7)" in task.last_error
    private = _logs(lc, issue)
    assert "E404 left-pad not found" in private and "fetching with [REDACTED]" in private
    assert value not in private
    public = "\n".join(c["body"] for c in await lc.comments(issue))
    assert "setup command 1 of 1 failed (exit 7)" in public
    assert "E404" not in public and "fetching" not in public and value not in public
    assert _cached_entries(lc) == []
