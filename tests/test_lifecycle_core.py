"""The lifecycle's core on its own: the state machine and its log on both databases, the
migration, the retry policy, and the coding-command protocol."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from alembic import command as alembic
from sqlalchemy import inspect, select

from bot import db as dbmod
from bot.clock import utcnow
from bot.errors import NotFound
from bot.lifecycle import tasks
from bot.lifecycle.coding import CodingOutcome, CodingRequest, CodingStatus, run_coding
from bot.lifecycle.context import LifecyclePolicy
from bot.lifecycle.models import EventKind, TaskEvent, TaskNotice
from bot.lifecycle.sandbox import SandboxPolicy, SandboxRun
from bot.lifecycle.states import TRANSITIONS, IllegalTransition, TaskState, can_transition
from bot.lifecycle.transition import Move, apply, transition
from tests.fakes.lifecycle import gone

LIFECYCLE_TABLES = {"tasks", "task_events", "task_leases", "task_notices", "chat_deliveries"}


def test_the_state_machine_allows_exactly_its_transitions() -> None:
    allowed = {(a, b) for a in TaskState for b in TaskState if can_transition(a, b)}
    assert allowed == {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    # A delivered task ends with its pull request, a review queues it again, or failing CI
    # gets it a fix run or a person's help; merged is final, and closed but for a reopen.
    ends = {TaskState.MERGED, TaskState.CLOSED}
    after_ci = {TaskState.RUNNING, TaskState.WAITING_FOR_INFO}
    after = {b for b in TaskState if can_transition(TaskState.DELIVERED, b)}
    assert after == ends | after_ci | {TaskState.QUEUED}
    assert not any(can_transition(TaskState.MERGED, b) for b in TaskState)
    reopened = {TaskState.DELIVERED, TaskState.FAILED, TaskState.WAITING_FOR_INFO}
    assert {b for b in TaskState if can_transition(TaskState.CLOSED, b)} == reopened
    assert can_transition(TaskState.WAITING_FOR_INFO, TaskState.RUNNING)
    assert not can_transition(TaskState.QUEUED, TaskState.WAITING_FOR_INFO)


def test_migration_creates_and_drops_the_lifecycle_tables(any_db_url: str) -> None:
    engine = dbmod.create_db_engine(any_db_url)
    dbmod.upgrade(engine)
    assert LIFECYCLE_TABLES <= set(inspect(engine).get_table_names())
    alembic.downgrade(dbmod.alembic_config(engine), "0003_github")
    assert not LIFECYCLE_TABLES & set(inspect(engine).get_table_names())
    dbmod.upgrade(engine)
    assert LIFECYCLE_TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()


@pytest.fixture
def database(any_db_url: str) -> Any:
    db = dbmod.Database.from_url(any_db_url)
    dbmod.upgrade(db.engine)
    yield db
    db.dispose()


def _new(db: dbmod.Database, issue: int = 7) -> int:
    return int(
        db.call(
            lambda s: (
                tasks.new_task(
                    s, repo="o/r", issue=issue, title="t", origin_session=None, actor="test"
                ).id
            )
        )
    )


def test_an_illegal_transition_is_refused_with_a_clear_error_and_logs_nothing(
    database: dbmod.Database,
) -> None:
    task_id = _new(database)
    with pytest.raises(IllegalTransition) as refused:
        database.call(apply, task_id, Move(TaskState.DELIVERED, actor="x", expect=[]))
    with pytest.raises(IllegalTransition) as refused:
        database.call(apply, task_id, Move(TaskState.WAITING_FOR_INFO, actor="x"))
    assert refused.value.status == 409
    assert "task 1 is queued; it cannot become waiting_for_info" in refused.value.message
    allowed = ["closed", "delivered", "failed", "merged", "running", "terminated"]
    assert refused.value.detail is not None and refused.value.detail.allowed == allowed
    log = database.call(lambda s: [(e.kind, e.to_state) for e in tasks.events(s, task_id)])
    assert log == [(EventKind.CREATED, TaskState.QUEUED)]
    with pytest.raises(NotFound):
        database.call(apply, 999, Move(TaskState.RUNNING, actor="x"))


def test_every_transition_is_logged_with_who_and_why(database: dbmod.Database) -> None:
    task_id = _new(database)
    database.call(
        apply, task_id, Move(TaskState.RUNNING, actor="worker:h:1", detail="go", data={"a": 1})
    )
    event: TaskEvent = database.call(lambda s: tasks.events(s, task_id)[-1])
    assert (event.from_state, event.to_state, event.actor, event.detail, event.data) == (
        "queued",
        "running",
        "worker:h:1",
        "go",
        {"a": 1},
    )
    assert event.at.tzinfo is not None


def test_no_state_change_goes_around_the_transition_seam(database: dbmod.Database) -> None:
    task_id = _new(database)
    with pytest.raises(ValueError, match=r"only through bot\.lifecycle\.transition"):
        database.call(tasks.touch, task_id, state=TaskState.DELIVERED)
    sneaked = Move(TaskState.RUNNING, actor="x", changes={"state": TaskState.DELIVERED})
    with pytest.raises(ValueError, match=r"never one of Move\.changes"):
        database.call(apply, task_id, sneaked)
    assert database.call(tasks.get_task, task_id).state == TaskState.QUEUED


async def test_a_transition_returns_what_moved_and_queues_its_notice_once(
    database: dbmod.Database,
) -> None:
    task_id = _new(database)
    moved = await transition(
        database, None, task_id, Move(TaskState.RUNNING, actor="w"), clock=utcnow
    )
    asked = Move(TaskState.WAITING_FOR_INFO, actor="w", notice="Which colour?", note="asked")
    question = await transition(database, None, task_id, asked, clock=utcnow)
    assert (moved.from_state, moved.state, moved.notice_key) == ("queued", "running", None)
    assert (question.from_state, question.state, question.note) == (
        "running",
        "waiting_for_info",
        "asked",
    )
    assert question.notice_key == f"waiting_for_info-e{question.event_id}"
    assert not question.published  # no GitHub: nothing shown yet, the reconciler will
    notices = database.call(lambda s: [(n.key, n.body) for n in s.scalars(select(TaskNotice))])
    assert len(notices) == 1 and notices[0][0] == question.notice_key
    assert "Which colour?" in notices[0][1]


def test_two_writers_racing_from_one_state_cannot_both_win(database: dbmod.Database) -> None:
    task_id = _new(database)
    database.call(apply, task_id, Move(TaskState.RUNNING, actor="w"))
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def move(wanted: TaskState) -> None:
        barrier.wait()
        try:
            database.call(
                apply, task_id, Move(wanted, actor=str(wanted), expect=[TaskState.RUNNING])
            )
            outcomes.append(f"won:{wanted}")
        except IllegalTransition:
            outcomes.append("refused")

    threads = [
        threading.Thread(target=move, args=(s,))
        for s in (TaskState.DELIVERED, TaskState.TERMINATED)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.startswith("won") for o in outcomes) == [False, True]
    final = database.call(lambda s: tasks.get_task(s, task_id).state)
    assert f"won:{final}" in outcomes


def test_retry_backoff_doubles_and_is_capped() -> None:
    policy = LifecyclePolicy(backoff_seconds=30)
    assert [policy.backoff(n) for n in (1, 2, 3)] == [30, 60, 120]
    assert policy.backoff(30) == 3600
    assert LifecyclePolicy(backoff_seconds=0).backoff(5) == 0


# -- the coding-command protocol ----------------------------------------------------------


async def _run(
    tmp_path: Path,
    script: str,
    *,
    limit: float = 10,
    stop: asyncio.Event | None = None,
    usage_limit: int | None = None,
) -> tuple[CodingOutcome, list[Any]]:
    calls: list[Any] = []

    async def on_start(pid: int) -> None:
        calls.append(("start", pid))

    async def on_session(session_id: str | None, transcript: str | None) -> None:
        calls.append(("session", session_id, transcript))

    def on_usage(tokens: int, cost: float) -> str | None:
        calls.append(("usage", tokens, cost))
        return "tokens" if usage_limit is not None and tokens > usage_limit else None

    outcome = await run_coding(
        CodingRequest(
            command=[sys.executable, "-c", script],
            run=SandboxRun(repo=tmp_path, tmp=tmp_path / "tmp", prompt=tmp_path / "prompt.md"),
            prompt="the prompt",
            time_limit=limit,
            task_env={"STEELFRAME_TASK_ID": "5"},
            # The protocol, unisolated (tests/test_sandbox_*.py run it in the sandbox).
            policy=SandboxPolicy(enabled=False, env_passthrough=("ANTHROPIC_API_KEY",)),
        ),
        stop=stop or asyncio.Event(),
        on_start=on_start,
        on_session=on_session,
        on_usage=on_usage,
        grace=0.5,
    )
    return outcome, calls


async def test_a_result_line_answers_and_the_session_is_reported_as_it_arrives(
    tmp_path: Path,
) -> None:
    script = (
        "import json, sys\n"
        "prompt = sys.stdin.read()\n"
        "print(json.dumps({'type': 'session', 'session_id': 's-1', 'transcript': 't.jsonl'}))\n"
        "print('plain text is log')\n"
        "print(json.dumps({'type': 'usage', 'input_tokens': 5, 'output_tokens': 7}))\n"
        "print(json.dumps({'type': 'result', 'status': 'done', 'summary': prompt}))\n"
    )
    outcome, calls = await _run(tmp_path, script)
    assert outcome.status == CodingStatus.DONE and outcome.summary == "the prompt"
    assert outcome.session_id == "s-1" and outcome.tokens == 12
    assert [c[0] for c in calls] == ["start", "session", "usage"]
    assert "plain text is log" in outcome.log_tail


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ("import sys; print('oops', file=sys.stderr); sys.exit(4)", "exited with status 4"),
        ("print('no result here')", "without a result line"),
        ("import json; print(json.dumps({'type': 'result', 'status': 'question'}))", "no question"),
        (
            "import json; print(json.dumps({'type': 'result', 'status': 'maybe'}))",
            "the coding command's result line was malformed (a value the protocol does not list"
            " - at `$.status`)",
        ),
    ],
)
async def test_a_runtime_that_breaks_the_protocol_is_an_error(
    tmp_path: Path, script: str, error: str
) -> None:
    outcome, _ = await _run(tmp_path, script)
    assert outcome.status == CodingStatus.ERROR
    assert error in outcome.error
    # What the runtime printed is in the private log only, never in the worker's words.
    assert "oops" not in outcome.error
    if "oops" in script:
        assert "[stderr] oops" in outcome.log.text()


async def test_a_malformed_protocol_line_is_said_in_the_log_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    script = (
        "import json\n"
        "def out(**line): print(json.dumps(line), flush=True)\n"
        "out(type='usage', input_tokens=100, output_tokens=1, cost_usd=0.5)\n"
        "out(type='usage', input_tokens='200', output_tokens=2, cost_usd=0.7)\n"
        "out(type='progress', action='dance', name='Bash')\n"
        "out(type='heartbeat', at=3)\n"
        "out(type='result', status='later', summary='not this one')\n"
        "out(type='result', status='done', summary='the answer', extra={'a': 1})\n"
    )
    outcome, calls = await _run(tmp_path, script)
    assert outcome.status == CodingStatus.DONE and outcome.summary == "the answer"
    # The string of digits was not taken: the totals are the last well-formed line's.
    assert (outcome.tokens, outcome.cost_usd) == (101, 0.5)
    assert [c[0] for c in calls] == ["start", "usage"]
    log_text = outcome.log.text()
    for note in (
        "malformed `usage` line (Expected `int`, got `str` - at `$.input_tokens`)",
        "malformed `progress` line (a value the protocol does not list - at `$.action`)",
        "malformed `result` line (a value the protocol does not list - at `$.status`)",
    ):
        assert f"[worker] the coding command printed a {note}" in log_text
    assert "dance" not in "\n".join(line for line in outcome.log.lines if "[worker]" in line)
    assert '[stdout] {"type": "heartbeat", "at": 3}' in log_text  # an unknown type: log text
    assert '{"type": "heartbeat", "at": 3}' in outcome.log_tail


@pytest.mark.parametrize(
    "earlier",
    [
        {"type": "result", "status": "question"},  # no question text: the worker's error
        {"type": "result", "status": "error"},  # gave up
        {"type": "result", "status": "error", "error": "out of turns", "limit": "turns"},
    ],
)
async def test_a_later_result_line_replaces_all_an_earlier_one_said(
    tmp_path: Path, earlier: dict[str, str]
) -> None:
    """The last result line is the answer: an earlier one's error or limit is not left on
    the outcome of a run that then finished (it would reach the task's memory note)."""
    done = {"type": "result", "status": "done", "summary": "the answer"}
    script = f"import json\nprint(json.dumps({earlier!r}))\nprint(json.dumps({done!r}))\n"
    outcome, _ = await _run(tmp_path, script)
    assert outcome.status == CodingStatus.DONE and outcome.summary == "the answer"
    assert (outcome.error, outcome.limit, outcome.reason, outcome.question) == ("", "", "", "")


async def test_the_time_limit_kills_the_whole_process_group(tmp_path: Path) -> None:
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(tmp_path / 'child')!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    outcome, calls = await _run(tmp_path, script, limit=0.5)
    assert outcome.status == CodingStatus.TIMED_OUT and outcome.limit == "time"
    assert outcome.seconds < 5
    child = int((tmp_path / "child").read_text())
    assert await gone(child, calls[0][1], within=30)  # before the child's own 60 s sleep ends


async def test_a_stop_request_ends_the_run(tmp_path: Path) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.3, stop.set)
    outcome, _ = await _run(tmp_path, "import time; time.sleep(60)", stop=stop)
    assert outcome.status == CodingStatus.STOPPED and outcome.seconds < 5


async def test_a_usage_limit_stops_the_runtime(tmp_path: Path) -> None:
    script = (
        "import json, time\n"
        "for n in range(100):\n"
        "    print(json.dumps({'type': 'usage', 'input_tokens': n * 100}), flush=True)\n"
        "    time.sleep(0.01)\n"
    )
    outcome, _ = await _run(tmp_path, script, usage_limit=450)
    assert outcome.status == CodingStatus.LIMIT and outcome.limit == "tokens"
    assert outcome.tokens == 500


async def test_the_runtime_gets_no_github_credentials_or_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIVATE_KEY", "-----BEGIN RSA-----")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", "postgresql://u:password@db/x")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "AUTHORIZATION: basic c2VjcmV0")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the runtime's own key")
    script = (
        "import json, os\n"
        "env = json.dumps(dict(os.environ))\n"
        "print(json.dumps({'type': 'result', 'status': 'done', 'summary': env}))\n"
    )
    outcome, _ = await _run(tmp_path, script)
    env = json.loads(outcome.summary)
    for name in ("PRIVATE_KEY", "GITHUB_TOKEN", "STEELFRAME_DATABASE_URL", "GIT_CONFIG_VALUE_0"):
        assert name not in env
    # An allowlist: PATH, locale, what the operator names (here the model key), the task's.
    assert env["ANTHROPIC_API_KEY"] == "the runtime's own key"
    allowed = {"PATH", "HOME", "TMPDIR", "ANTHROPIC_API_KEY", "STEELFRAME_TASK_ID"}
    assert set(env) - allowed - {"STEELFRAME_PROMPT_FILE", "LANG", "LANGUAGE", "TZ", "TERM"} <= {
        name for name in env if name.startswith("LC_")
    }
    assert env["STEELFRAME_TASK_ID"] == "5"
    prompt = await asyncio.to_thread(Path(env["STEELFRAME_PROMPT_FILE"]).read_text)
    assert prompt == "the prompt"
