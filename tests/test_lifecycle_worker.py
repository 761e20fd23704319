"""`steelframe worker` (RQ's forking Worker) and `steelframe reconcile` as processes: a
worker killed mid-run leaves a task that the next worker (or RQ's failure handling)
recovers, never one left `running`."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
from rq import Queue, Worker
from rq.job import Job
from rq.scheduler import RQScheduler

from bot import heap_freeze
from bot.lifecycle import leases
from bot.lifecycle.models import EventKind
from bot.lifecycle.queue import rq_queue
from bot.lifecycle.reconcile import reconciler_lease_name, run_reconcile
from bot.lifecycle.states import TaskState
from bot.lifecycle.worker import LifecycleWorker
from bot.stop_request import STOP_SIGNALS, StopRequest
from steelframe.cli import main
from tests.fakes.coding import command
from tests.fakes.lifecycle import PATIENCE_SECONDS, Lifecycle, Make, alive, gone, wait_for
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import (
    exchange_dir,
    host_pids,
    launcher_of,
    running_in_sandbox,
    runtime_pids,
    the_runtime,
)
from tests.fakes.workers import CREDENTIAL_VARS, start_worker, stop_processes, worker_env


@pytest.mark.slow
async def test_a_worker_killed_mid_run_is_recovered_by_the_next_worker_start(
    make: Make, tmp_path: Path
) -> None:
    marker = exchange_dir(tmp_path) / "first-run.pid"
    lc = await make(coding_command=command("crash_once", marker), task_lease_seconds=1.0)
    issue = await lc.open_issue()
    task = lc.task(issue)
    first = start_worker(lc, tmp_path / "worker1.log")
    try:
        await wait_for(
            lambda: marker.exists() and marker.read_text().strip(), within=PATIENCE_SECONDS
        )
        runtime_pid = await the_runtime(str(marker))
        sandboxed = running_in_sandbox(runtime_pid)
        assert lc.task(issue).state == TaskState.RUNNING
        # The whole worker dies at once: the worker and its scheduler (one group), and
        # the work horse (RQ puts it in a group of its own).
        horse = launcher_of(runtime_pid)
        os.killpg(first.pid, signal.SIGKILL)
        os.killpg(horse, signal.SIGKILL)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        await asyncio.to_thread(first.wait)
    assert lc.task(issue).state == TaskState.RUNNING  # nobody is left to say otherwise
    if sandboxed:
        assert await gone(runtime_pid)  # bwrap --die-with-parent: it dies with its worker
    else:
        assert alive(runtime_pid)  # a process group of its own: an orphan now

    def expired() -> bool:
        lease = lc.ctx.db.call(leases.current, task.id)
        return lease is not None and lease.expires_at < lc.ctx.clock()

    await wait_for(expired, within=PATIENCE_SECONDS)
    second = start_worker(lc, tmp_path / "worker2.log", "--burst")
    assert await asyncio.to_thread(second.wait, PATIENCE_SECONDS) == 0
    output = (tmp_path / "worker2.log").read_text()
    assert f"recovered running tasks: [{task.id}]" in output
    await lc.settle()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, output
    assert task.attempts == 2
    assert await gone(runtime_pid), "the orphaned runtime was not killed"
    assert lc.branch_file("RECOVERED.md", f"steelframe/issue-{issue}") == "done after a crash\n"
    # The recovery is among the reconciler's events, not always the first: the first
    # worker's own passes (one a lease period, 1 s here) may have put the issue's labels
    # right while its run was starting (seen on a loaded machine: "labels repaired").
    recovered = [e.detail + str(e.data) for e in lc.events(task.id) if e.actor == "reconciler"]
    assert any("lease expired" in said for said in recovered), recovered


@pytest.mark.slow
async def test_a_killed_work_horse_is_retried_by_the_worker_that_forked_it(
    make: Make, tmp_path: Path
) -> None:
    marker = exchange_dir(tmp_path) / "first-run.pid"
    lc = await make(coding_command=command("crash_once", marker), task_lease_seconds=5.0)
    issue = await lc.open_issue()
    worker = start_worker(lc, tmp_path / "worker.log")
    try:
        await wait_for(
            lambda: marker.exists() and marker.read_text().strip(), within=PATIENCE_SECONDS
        )
        runtime_pid = await the_runtime(str(marker))
        horse = launcher_of(runtime_pid)
        assert horse != worker.pid
        os.kill(horse, signal.SIGKILL)
        await wait_for(lambda: lc.task(issue).state == TaskState.DELIVERED, within=PATIENCE_SECONDS)
    finally:
        await stop_processes([worker], within=10)
    task = lc.task(issue)
    assert task.attempts == 2
    assert await gone(runtime_pid)
    died = [e for e in lc.events(task.id) if e.to_state == TaskState.QUEUED and e.data]
    assert "worker process running it died" in died[0].data["error"]
    await lc.settle()
    assert len(await lc.pulls()) == 1


@pytest.mark.slow
async def test_a_terminated_job_that_does_not_stop_is_stopped_through_rq(
    make: Make, tmp_path: Path, pg_url: str
) -> None:
    # PostgreSQL: a work horse frozen by SIGSTOP may be inside a write (its lease heartbeat);
    # SQLite would lock the whole file until it thawed, PostgreSQL only the rows it holds.
    pids = exchange_dir(tmp_path) / "pids.txt"
    lc = await make(
        coding_command=command("hang", pids), task_lease_seconds=1.0, database_url=pg_url
    )
    issue = await lc.open_issue()
    task = lc.task(issue)
    worker = start_worker(lc, tmp_path / "worker.log")
    try:
        await wait_for(lambda: pids.exists() and pids.read_text().strip(), within=PATIENCE_SECONDS)
        runtime, grandchild = runtime_pids(str(pids))
        sandbox_processes = host_pids(str(pids))
        horse = launcher_of(runtime)
        os.kill(horse, signal.SIGSTOP)  # a stuck work horse: it cannot notice anything
        response = await lc.api.post(f"/api/operator/tasks/{task.id}/terminate")
        # 200: terminated now. 202: the horse froze inside its heartbeat's write, holding
        # the task's row; the request is recorded and a reconciler applies it.
        assert response.status in (200, 202), await response.text()
        applied_at_once = response.status == 200

        # A lease period after the terminate (or at once, for a recorded one), a reconciler
        # asks RQ to stop the job: this pass, or the worker's own periodic one when the
        # machine is slow enough that it comes first (it records that on the task, or for
        # a recorded request, in its log).
        def stopped_through_rq() -> bool:
            if task.id in run_reconcile(lc.ctx, say=lambda line: None).stopped:
                return True
            log = (tmp_path / "worker.log").read_text()
            return f"reconcile: task {task.id}: stopped the job holding its row" in log or any(
                e.kind == EventKind.RECONCILED
                and (e.detail or "").startswith("the job of the terminated task still ran")
                for e in lc.events(task.id)
            )

        await wait_for(stopped_through_rq, within=PATIENCE_SECONDS)
        assert await gone(horse, runtime, grandchild, *sandbox_processes)

        def terminated() -> bool:  # a recorded request is applied once the row is free
            if lc.task(issue).state != TaskState.TERMINATED:
                run_reconcile(lc.ctx, say=lambda line: None)
            return lc.task(issue).state == TaskState.TERMINATED

        await wait_for(terminated, within=PATIENCE_SECONDS)
        assert list(lc.ctx.worktrees.glob(f"task-{task.id}-*")) == []
    finally:
        await stop_processes([worker], within=10)
    assert lc.task(issue).state == TaskState.TERMINATED
    if applied_at_once:
        stopped = [e for e in lc.events(task.id) if e.kind == EventKind.RECONCILED]
        assert stopped[-1].data["action"] == "stop_sent"


# RQ's command listener reads with a 60 s timeout: a worker that waited it out to stop
# would still be running well past this.
STOPS_WITHIN = 20


async def test_a_worker_process_told_to_stop_exits_at_once(make: Make, tmp_path: Path) -> None:
    lc = await make()
    worker = start_worker(lc, tmp_path / "worker.log")
    try:

        def listening() -> bool:
            """Waiting for jobs (its signal handlers are installed by then) and subscribed to
            the channel RQ's commands come on."""
            queue = rq_queue(lc.ctx.queue_name, lc.ctx.redis)  # not another test's leak
            idle = [w.name for w in Worker.all(queue=queue) if w.state == "idle"]
            return bool(idle) and bool(lc.ctx.redis.pubsub_channels(f"rq:pubsub:{idle[0]}"))

        await wait_for(listening, within=PATIENCE_SECONDS)
        os.killpg(worker.pid, signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, STOPS_WITHIN)
    finally:
        await stop_processes([worker], within=1)
    assert code == 0, (tmp_path / "worker.log").read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_worker_told_to_stop_while_starting_leaves_cleanly(
    make: Make, tmp_path: Path, signum: signal.Signals
) -> None:
    """A deploy or a scale-down (SIGTERM), or a person (Ctrl+C), stops a worker that is
    still starting: here parked waiting for another worker's reconcile lease (up to 30 s).
    It leaves at once with 0, takes no job and leaves no worker record. Before, it was
    killed outright by the signal, whatever step it was in."""
    lc = await make()
    lc.ctx.redis.set(reconciler_lease_name(lc.ctx.queue_name), "a-dead-worker", px=120_000)
    log = tmp_path / "worker.log"
    worker = start_worker(lc, log)
    try:
        await wait_for(
            lambda: "another worker is reconciling" in log.read_text(), within=PATIENCE_SECONDS
        )
        os.killpg(worker.pid, signum)
        code = await asyncio.to_thread(worker.wait, STOPS_WITHIN)  # not the lease's 120 s
    finally:
        await stop_processes([worker], within=1)
    output = log.read_text()
    assert code == 0, output
    assert f"{signum.name} while starting; stopped" in output
    assert "the lease stayed taken" not in output
    assert Worker.all(connection=lc.ctx.redis) == []


def test_a_second_stop_signal_while_starting_stops_at_once() -> None:
    """The first signal waits for the start-up step; the same signal delivered twice at once
    (a supervisor forwarding it beside the terminal) is one stop; asked again later (Ctrl+C
    again on a step that hangs), the process ends as the signal's default action ends it."""
    script = (
        "import os, signal, time\n"
        "from bot import stop_request\n"
        "request = stop_request.StopRequest().install()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print(request.requested, request.signal_name, flush=True)\n"
        "time.sleep(stop_request.DUPLICATE_SECONDS + 0.2)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(30)\n"
        "print('still running', flush=True)\n"
    )
    result = _python(script)
    assert result.stdout == "True SIGTERM\n", result.stderr
    assert result.returncode == -signal.SIGTERM


def test_a_process_forked_while_the_worker_starts_can_be_stopped() -> None:
    """RQ forks its scheduler before it installs its handlers; the child must die of the
    SIGTERM its parent stops it with, not remember it for a parent's start-up it has not."""
    script = (
        "import os, signal, time\n"
        "from bot.stop_request import StopRequest\n"
        "StopRequest().install()\n"
        "ready, started = os.pipe()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os.write(started, b'!')\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "os.read(ready, 1)\n"
        "os.kill(child, signal.SIGTERM)\n"
        "_, status = os.waitpid(child, 0)\n"
        "print(os.waitstatus_to_exitcode(status), flush=True)\n"
    )
    result = _python(script)
    assert result.stdout == f"{-signal.SIGTERM}\n", result.stderr


def test_a_stop_held_back_by_the_parent_reaches_the_request_once_it_holds_the_signals() -> None:
    """A supervisor starts its children with the stop signals blocked; one it sent before
    the child's interpreter was up is pending, and lands in the request when it installs."""
    script = (
        "import os, signal\n"
        "from bot.stop_request import StopRequest, stop_signals_blocked\n"
        "with stop_signals_blocked():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    print('pending', signal.SIGINT in signal.sigpending(), flush=True)\n"
        "    request = StopRequest().install()\n"
        "    print(request.requested, request.signal_name, flush=True)\n"
    )
    result = _python(script)
    assert result.stdout == "pending True\nTrue SIGINT\n", result.stderr
    assert result.returncode == 0


def _python(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by this environment's Python in a process of its own."""
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=STOPS_WITHIN
    )


async def test_a_stop_signalled_before_rq_takes_the_signals_is_a_warm_shutdown(
    make: Make,
) -> None:
    """The window inside `work()` itself: registered and subscribed, RQ's handlers not yet in.
    A stop that arrived there leaves at the loop's first turn, deregistered, with the queued
    job left for the next worker."""
    lc = await make(coding_command=command("commit"))
    await lc.open_issue()
    assert Queue(lc.ctx.queue_name, connection=lc.ctx.redis).count == 1
    stop_request = StopRequest()  # as if its handler had been signalled during RQ's start
    stop_request.requested, stop_request.signal_name = True, "SIGTERM"
    worker = LifecycleWorker(
        [rq_queue(lc.ctx.queue_name, lc.ctx.redis)],
        connection=lc.ctx.redis,
        lifecycle=lc.ctx,
        stop_request=stop_request,
    )
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        worked = worker.work()  # on the main thread, where RQ installs its handlers
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert worked is False
    assert Worker.all(connection=lc.ctx.redis) == []
    assert Queue(lc.ctx.queue_name, connection=lc.ctx.redis).count == 1


class _StopsLost:
    """RQ's scheduler's stop handler, losing the first `lost` SIGTERMs as a scheduler forked
    moments before its worker's stop does (one that reaches it before CPython's after-fork
    step is dropped). Patched onto the class before the fork: the child counts its own."""

    def __init__(self, lost: int) -> None:
        self.lost = lost

    def request_stop(
        self, scheduler: RQScheduler, signum: int | None = None, frame: Any = None
    ) -> None:
        if self.lost > 0:
            self.lost -= 1
            return
        scheduler._stop_requested = True


async def _scheduling(
    lc: Lifecycle, lost: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[LifecycleWorker, BaseProcess]:
    """A worker and its scheduler process, running with its stop handler in place (it
    registers its birth right after installing it), losing its first `lost` stops."""
    stops = _StopsLost(lost)
    monkeypatch.setattr(
        RQScheduler, "request_stop", lambda self, *args: stops.request_stop(self, *args)
    )
    worker = LifecycleWorker(
        [rq_queue(lc.ctx.queue_name, lc.ctx.redis)], connection=lc.ctx.redis, lifecycle=lc.ctx
    )
    worker._start_scheduler()  # RQ's: takes the queue's scheduler lock, forks the scheduler
    scheduler = worker.scheduler
    assert scheduler is not None and scheduler._process is not None
    await wait_for(lambda: lc.ctx.redis.exists(scheduler.key), within=PATIENCE_SECONDS)
    return worker, scheduler._process


async def test_a_scheduler_that_lost_its_stop_is_asked_again_until_it_stops(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen under load: a worker stopped as it started waited on its scheduler for good
    (RQ asks once, then waits without a bound), until a second signal killed it."""
    lc = await make()
    worker, process = await _scheduling(lc, 1, monkeypatch)
    try:
        await asyncio.wait_for(asyncio.to_thread(worker.stop_scheduler), STOPS_WITHIN)
        assert process.exitcode == 0  # it stopped itself, as asked
        lock = RQScheduler.get_locking_key(lc.ctx.queue_name)
        assert not lc.ctx.redis.exists(lock)  # and released the queue on its way out
    finally:
        process.kill()  # whatever happened above, no scheduler outlives the test
        process.join()


async def test_a_scheduler_that_never_stops_is_killed_after_the_bound(
    make: Make, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lc = await make()
    worker, process = await _scheduling(lc, 1_000_000, monkeypatch)
    worker.scheduler_stop_seconds = 1.0
    try:
        await asyncio.wait_for(asyncio.to_thread(worker.stop_scheduler), STOPS_WITHIN)
        assert process.exitcode == -signal.SIGKILL
        assert f"the scheduler (PID {process.pid}) did not stop within 1 s; killed" in caplog.text
    finally:
        process.kill()  # whatever happened above, no scheduler outlives the test
        process.join()


class _ReportingHorse(LifecycleWorker):
    """RQ's forking worker whose horse, instead of running the job, says through a pipe how
    many objects it inherited frozen, and exits."""

    report: int = -1

    def main_work_horse(self, job: Job, queue: Queue) -> None:
        os.write(self.report, str(gc.get_freeze_count()).encode())
        os._exit(0)


async def test_a_work_horse_inherits_the_workers_heap_frozen_and_the_worker_does_not_keep_it(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The horse's collections leave the worker's objects (and so their shared pages)
    alone; the worker's own collections go on as before (bench/worker_fork_memory.py)."""
    for name in ("RQ_WORKER_ID", "RQ_JOB_ID"):  # RQ's fork sets them in the worker
        monkeypatch.setenv(name, "")
    lc = await make()
    worker = _ReportingHorse(
        [rq_queue(lc.ctx.queue_name, lc.ctx.redis)], connection=lc.ctx.redis, lifecycle=lc.ctx
    )
    queue = rq_queue(lc.ctx.queue_name, lc.ctx.redis)
    job = queue.enqueue_call(func="builtins.len", args=([],))  # never run: the horse reports
    read, worker.report = os.pipe()
    # As in `steelframe worker`, whose heap nothing keeps frozen once it thawed its modules:
    # the test process froze its own (gc_policy.py), and the freeze record knows it.
    monkeypatch.setattr(heap_freeze, "_owner", None)
    monkeypatch.setattr(heap_freeze, "_looked_outside", True)  # both restored after the test
    gc.unfreeze()
    tracked = len(gc.get_objects())
    try:
        worker.fork_work_horse(job, queue)
        after_fork = gc.get_freeze_count()
    finally:
        gc.freeze()  # the test process's policy again, once the worker's is read
        os.close(worker.report)
    with os.fdopen(read) as answer:
        frozen_in_horse = int(answer.read())
    await asyncio.to_thread(os.waitpid, worker.horse_pid, 0)
    if worker._handback is not None:
        os.close(worker._handback[0])
    assert frozen_in_horse >= tracked // 2  # the heap it was forked with
    assert after_fork == 0  # the worker's own heap is collected as before


class _StoppedInTheFork(LifecycleWorker):
    """RQ's forking worker whose horse, instead of running the job, is sent SIGTERM (when
    `stop_in_window`) before RQ's horse handlers are in, as a stop to every process of the
    service (systemd's, a container runtime's) reaches it in the moments after the fork; it
    then puts them in as RQ's horse does first and says through a pipe how it went on."""

    report: int = -1
    stop_in_window = False

    def main_work_horse(self, job: Job, queue: Queue) -> None:
        try:
            if self.stop_in_window:
                os.kill(os.getpid(), signal.SIGTERM)
            self.setup_work_horse_signals()
            blocked = sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))
            os.write(self.report, f"ran on, blocking {blocked}".encode())
        except BaseException as exc:  # the worker's own handler, run in the horse
            os.write(self.report, f"ran the worker's handler: {type(exc).__name__}".encode())
        os._exit(0)


async def _fork_stopped_horse(
    lc: Lifecycle, monkeypatch: pytest.MonkeyPatch, *, stop_in_window: bool
) -> tuple[str, int, set[int], set[int]]:
    """What the horse said, its wait status, and the worker's signal mask before and after
    the fork, with RQ's worker handlers in place (as in `work()`)."""
    for name in ("RQ_WORKER_ID", "RQ_JOB_ID"):  # RQ's fork sets them in the worker
        monkeypatch.setenv(name, "")
    queue = rq_queue(lc.ctx.queue_name, lc.ctx.redis)
    worker = _StoppedInTheFork([queue], connection=lc.ctx.redis, lifecycle=lc.ctx)
    worker.stop_in_window = stop_in_window
    job = queue.enqueue_call(func="builtins.len", args=([],))  # never run
    read, worker.report = os.pipe()
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    before = set(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    try:
        worker._install_signal_handlers()  # on the main thread, as `work()` does
        worker.fork_work_horse(job, queue)
        after = set(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        os.close(worker.report)
    _, status = await asyncio.to_thread(os.waitpid, worker.horse_pid, 0)
    with os.fdopen(read) as answer:
        said = answer.read()
    if worker._handback is not None:
        os.close(worker._handback[0])
    return said, status, before, after


async def test_a_stop_reaching_a_work_horse_as_it_forks_waits_for_the_horses_handlers(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the worker's `request_stop` (which, run in the horse, raised StopRequested out of
    the fork into a second worker loop, or wrote the worker's shutdown into Redis): held
    until RQ's horse handlers are in, it ends the horse by SIGTERM's default action."""
    lc = await make()
    said, status, before, after = await _fork_stopped_horse(lc, monkeypatch, stop_in_window=True)
    assert said == ""
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert after == before  # the worker takes its stops again once the fork returns


async def test_a_work_horse_runs_with_the_workers_signal_mask_once_its_handlers_are_in(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    lc = await make()
    said, status, before, after = await _fork_stopped_horse(lc, monkeypatch, stop_in_window=False)
    assert said == f"ran on, blocking {sorted(before)}"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert after == before


async def test_an_in_process_worker_stops_at_once(make: Make) -> None:
    lc = await make()
    worker = lc.worker()  # `steelframe dev`'s: a burst over an empty queue, then it stops
    await asyncio.wait_for(asyncio.to_thread(worker.work, burst=True), STOPS_WITHIN)
    assert worker.pubsub_thread is not None and not worker.pubsub_thread.is_alive()


async def test_reconcile_command_reports_what_it_repaired(make: Make, tmp_path: Path) -> None:
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    await lc.work()
    await lc.github.remove_label(lc.repo, issue, "steelframe:delivered")
    lc.age_history(issue)  # drift, not the delivery's own label update on its way
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "steelframe.cli", "reconcile", "--queue", lc.ctx.queue_name],
        env=worker_env(lc),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "reconcile: checking labels of 1 tasks ..." in result.stdout
    assert f"labels repaired: [{lc.task(issue).id}]" in result.stdout
    assert "steelframe:delivered" in await lc.labels(issue)
    fixed = [e for e in lc.events(lc.task(issue).id) if e.kind == EventKind.RECONCILED]
    assert len(fixed) == 1


async def test_a_worker_waits_out_the_reconciler_lease_of_a_dead_one_then_repairs(
    make: Make, tmp_path: Path
) -> None:
    # A worker killed during its reconcile pass leaves the lease until it expires; the next
    # worker's first pass must still run (for `--burst` it is the only one).
    lc = await make(coding_command=command("commit"))
    issue = await lc.open_issue()
    await lc.work()
    await lc.github.remove_label(lc.repo, issue, "steelframe:delivered")
    lc.age_history(issue)  # drift, not the delivery's own label update on its way
    lease = reconciler_lease_name(lc.ctx.queue_name)
    # Outlives a slow worker start (the wait for it to say it waits).
    lc.ctx.redis.set(lease, "a-dead-worker", px=int(2 * PATIENCE_SECONDS * 1000))
    log = tmp_path / "worker.log"
    worker = start_worker(lc, log, "--burst")
    waiting = "another worker is reconciling; waiting for its pass"
    await wait_for(lambda: waiting in log.read_text(), within=PATIENCE_SECONDS)
    lc.ctx.redis.pexpire(lease, 1)  # the dead worker's lease runs out
    assert await asyncio.to_thread(worker.wait, PATIENCE_SECONDS) == 0
    output = log.read_text()
    assert f"labels repaired: [{lc.task(issue).id}]" in output
    assert "steelframe:delivered" in await lc.labels(issue)


def test_worker_without_redis_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.startswith(CREDENTIAL_VARS):
            monkeypatch.delenv(name)
    monkeypatch.setenv("STEELFRAME_DATABASE_URL", f"sqlite:///{tmp_path / 'w.db'}")
    monkeypatch.chdir(tmp_path)
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    need = "steelframe: the lifecycle needs Redis: set STEELFRAME_REDIS_URL\n"
    assert main(["worker", "--burst"]) == 2
    # That line alone: no warnings first about coding agents of a worker that cannot start.
    assert capsys.readouterr().err == need
    assert main(["reconcile"]) == 2
    assert capsys.readouterr().err == need
    # Called in process (as here, or by an embedder), it leaves the caller's handlers.
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == handlers
