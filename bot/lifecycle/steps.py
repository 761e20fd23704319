"""The steps of a started run, in order: the issue text it works from, the announcement,
the opening every coding run shares (`open_workspace`: time left, the sandbox check, the
claimed clone of `branch`, the repository's setup, the prompt), the coding runtime, its
record (`run_log`), and the end (delivered, a question, or failed).

Every change a step makes to the task carries the run's lease holder (`Run.fence`), and
each effect outside the database (push, pull request) is preceded by a lease check, so a
run that lost its lease changes nothing. The push is fenced on the remote as well: the run
claims its branch when it starts (`worktree.claim`) and its push lands only while that
claim stands, so a run that stalls between its lease check and the push, and wakes after
another run took over, still changes nothing. Every text that leaves the run (comments, events,
memory, the private log, the pushed branch) goes through the context's `Redactor`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from bot.github.issue_records import Label
from bot.lifecycle import (
    auto_resume,
    budget,
    plan_flow,
    repo_tests,
    setup_run,
    tasks,
    worktree,
)
from bot.lifecycle.agents.base import ASK_INSTRUCTION
from bot.lifecycle.branch import let_go, prepare, push, unpushable
from bot.lifecycle.coding import CodingOutcome, CodingStatus, RunLog
from bot.lifecycle.coding_step import code
from bot.lifecycle.delivery import deliver_pending
from bot.lifecycle.egress import ensure_available
from bot.lifecycle.finish import finish_delivered, finish_failed, finish_move, finish_question
from bot.lifecycle.memory_task import memory_write, write_memory
from bot.lifecycle.models import EventKind
from bot.lifecycle.presets_run import preset_label
from bot.lifecycle.progress import Phase
from bot.lifecycle.prompt import PromptInput, build_prompt
from bot.lifecycle.pulls import existing_pull, open_pull, opens_as_draft
from bot.lifecycle.recall import remember, retrieve
from bot.lifecycle.run_log import keep_log, record
from bot.lifecycle.sandbox import SandboxUnavailable
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, show

log = logging.getLogger(__name__)
MAX_REASON = 200
NO_RUNTIME_NOTICE = (
    "Steelframe picked up this issue, but no coding runtime is configured on its workers "
    "(neither `STEELFRAME_CODING_AGENT` nor `STEELFRAME_CODING_COMMAND` is set), so nothing "
    "was changed and no pull request "
    "will come from this run. Once a runtime is configured, publish a Decision on this issue "
    "to resume the task."
)
EDITED_NOTE = (
    "The issue's title or body changed after the task was picked up; this run works from the "
    "text as it was when it was picked up (edits count only from someone with write access)."
)


@dataclass(frozen=True)
class IssueText:
    title: str
    body: str
    note: str  # for the progress comment ("" when the text is as it was pinned)
    labels: tuple[Label, ...] = ()  # as the issue has them now


@dataclass(frozen=True)
class Workspace:
    """A run ready for its coding runtime: the claimed clone with the repository's setup
    done, the prompt from the issue, and the seconds the runtime may take (setup's counted)."""

    tree: worktree.Worktree
    prompt: str
    remaining: float


@dataclass(frozen=True)
class Ended:
    """The run ended before its runtime started (no runtime, no time left, no sandbox, the
    setup refused, or the caller's check of the clone); what happened, in words."""

    said: str


CloneCheck = Callable[[worktree.Worktree], Awaitable[str | None]]


async def open_workspace(
    run: Run,
    text: IssueText,
    *,
    check_clone: CloneCheck | None = None,
    with_decision: bool = True,
) -> Workspace | Ended:
    """The opening every coding run shares (the issue's, a review's, a CI fix's): a runtime
    configured, time left, the sandbox, the claimed clone (`check_clone` may end the run
    there, in its words), the repository's setup, then time left again and the prompt
    (without the task's Decision when the caller pins it itself: `with_decision=False`)."""
    policy = run.ctx.policy
    if not policy.coding_command:
        return Ended(await no_runtime(run))
    if policy.time_limit - run.task.runtime_seconds <= 0:
        return Ended(await fail(run, limit="time", retry=False))
    if (refused := await sandbox_refusal(run)) is not None:
        return Ended(refused)
    tree = await prepare(run)
    if check_clone is not None and (said := await check_clone(tree)) is not None:
        return Ended(said)
    if (refused := await prepare_environment(run, tree)) is not None:
        return Ended(refused)
    setup = run.repo_env.setup_seconds if run.repo_env else 0.0
    remaining = policy.time_limit - run.task.runtime_seconds - setup
    if remaining <= 0:  # the setup took what was left
        return Ended(await fail(run, limit="time", retry=False))
    prompt = await run_prompt(run, text, tree, with_decision=with_decision)
    return Workspace(tree, prompt, remaining)


async def work(run: Run) -> str:
    """The whole of a started run; returns what happened, in words."""
    text = await issue_text(run)
    await _announce(run, text)
    task, ctx = run.task, run.ctx
    if task.pushed_at is not None and (pull := await existing_pull(run)) is not None:
        draft = pull.draft
        return await finish_delivered(
            ctx, run.github, task.id, run.actor, summary="", fence=run.fence, draft=draft
        )
    # A steelframe:memory task: written here.
    memory = memory_write(text.title, text.body, text.labels)
    if memory is not None:  # no runtime runs, so no sandbox is needed
        tree = await prepare(run)
        prompt = f"Write the committed memory {memory.path} for #{task.issue}."
        outcome = await asyncio.to_thread(write_memory, tree.path, memory)
        return await _finish_run(run, tree, prompt, outcome)
    opened = await open_workspace(run, text)
    if isinstance(opened, Ended):
        return opened.said
    tree, prompt = opened.tree, opened.prompt
    plan = await plan_flow.gate(run, text.labels)  # plan-first: plan, or follow the approved plan
    if plan.rejected:
        return await plan_flow.reject(run)
    if plan.plan_run:
        return await _plan(run, tree, prompt, opened.remaining)
    prompt += plan.pinned
    if zero := budget.for_run(run).exhausted():  # a budget of 0: no coding run
        return await budget.reached(run, zero)
    outcome = await code(run, tree, prompt, opened.remaining)
    outcome = await _checked(run, tree, prompt, outcome)
    return await _finish_run(run, tree, prompt, outcome)


async def _plan(run: Run, tree: worktree.Worktree, prompt: str, remaining: float) -> str:
    """A plan-first task's read-only plan run: its log and usage kept, its plan posted."""
    outcome = await code(run, tree, plan_flow.plan_prompt(prompt), remaining, plan=True)
    await record(run, outcome)
    return await plan_flow.propose(run, outcome)


async def _checked(
    run: Run, tree: worktree.Worktree, prompt: str, outcome: CodingOutcome
) -> CodingOutcome:
    """Check before delivering: a done run whose tests fail gets one more run with their
    output; its outcome is the run's, unless it failed (then the first is delivered, and
    the red tests make its pull request a draft)."""
    if outcome.status != CodingStatus.DONE or not await repo_tests.check(run, tree):
        return outcome
    await _counted(run, outcome)  # the second run's limits count the first
    assert run.tests is not None
    fix = repo_tests.fix_prompt(prompt, run.tests, run.ctx.redactor)
    # Setup's and the tests' time count too: the RQ job's margin stays for git and GitHub.
    spent = run.task.runtime_seconds + run.tests.seconds
    spent += run.repo_env.setup_seconds if run.repo_env else 0.0
    again = await code(run, tree, fix, run.ctx.policy.time_limit - spent)
    if again.status in (CodingStatus.DONE, CodingStatus.QUESTION, CodingStatus.STOPPED):
        if again.status == CodingStatus.DONE:
            await repo_tests.check(run, tree)
        return again
    # The second run failed: the first run's work (kept and counted above) is delivered.
    await _counted(run, again)
    delivered = RunLog()
    delivered.add("worker", "the second run failed; the first run's work is delivered as a draft")
    return replace(
        outcome, seconds=0.0, input_tokens=0, output_tokens=0, cost_usd=0.0, log=delivered
    )


async def _counted(run: Run, outcome: CodingOutcome) -> None:
    """A run that is not the run's last: its log kept and its usage counted now."""
    await record(run, outcome)
    run.task = await run.ctx.db.run(tasks.get_task, run.task.id)


async def prepare_environment(run: Run, tree: worktree.Worktree) -> str | None:
    """The repository's config and setup (setup_run.prepare); the failure when refused."""
    try:
        run.repo_env = await setup_run.prepare(run, tree)
    except setup_run.SetupRefused as exc:
        if exc.private:
            await asyncio.to_thread(keep_log, run, "setup", exc.private)
        return await fail(run, error=run.public(exc.public, 300), retry=exc.retry)
    if run.repo_env.setup_log:
        await asyncio.to_thread(keep_log, run, "setup", run.repo_env.setup_log)
    return None


async def _finish_run(
    run: Run, tree: worktree.Worktree, prompt: str, outcome: CodingOutcome
) -> str:
    """Keep the private log, account for the run, remember it, then deliver, ask or fail."""
    await recorded(run, tree, prompt, outcome)
    concluded = await conclude(run, tree, outcome)
    await after_conclusion(run)
    return concluded


async def recorded(run: Run, tree: worktree.Worktree, prompt: str, outcome: CodingOutcome) -> None:
    """A run's last runtime recorded (`record`), the run still wanted (not stopped, its
    lease held), and what it did remembered for the next prompts (recall)."""
    await record(run, outcome)
    run.watch.check()
    await remember(run.ctx, run.task, prompt, outcome, await changed_paths(tree))


async def after_conclusion(run: Run) -> None:
    """The task's state is settled: its result goes to the chat that filed the task, then
    the run, which has pushed all it will, removes its claim on the branch (so the
    repository keeps no fence ref per task). Neither may fail the concluded run: a result
    not delivered now is delivered when the run ends or by the reconciler, and a claim
    left behind is one small ref (the task's next run forces its own over it)."""
    task_id = run.task.id
    try:
        await asyncio.to_thread(deliver_pending, run.ctx.db, task_id, clock=run.ctx.clock)
    except Exception as exc:
        log.warning(
            "lifecycle: task %s: result not delivered yet (%s)", task_id, type(exc).__name__
        )
    await let_go(run)


async def run_prompt(
    run: Run, text: IssueText, tree: worktree.Worktree, *, with_decision: bool = True
) -> str:
    task = run.task
    hits = await retrieve(run.ctx, task, text.body)
    instructions = run.repo_env.instructions if run.repo_env else ""
    return (
        build_prompt(
            PromptInput(
                repo=task.repo,
                issue=task.issue,
                title=text.title,
                body=text.body,
                branch=tree.branch,
                hits=hits,
                question=task.question,
                decision=task.pending_decision if with_decision else None,
                **({"ask": ASK_INSTRUCTION} if preset_label(run.ctx) else {}),
            )
        )
        + instructions
    )


async def issue_text(run: Run) -> IssueText:
    """The pinned title and body (pinned now if the pickup could not); a note if the issue
    says something else today."""
    task = run.task
    issue = await run.github.get_issue(task.repo, task.issue)
    title, body = issue.title or task.title, issue.body or ""
    labels = tuple(Label(name) for name in issue.label_names)
    if task.pinned_at is None:
        changes: tasks.TaskChanges = {
            "issue_title": title,
            "issue_body": body,
            "pinned_at": run.ctx.clock(),
        }
        await run.ctx.db.run(tasks.touch, task.id, run.ctx.clock, fence=run.fence, **changes)
        return IssueText(title, body, "", labels)
    pinned = IssueText(task.issue_title or task.title, task.issue_body or "", "", labels)
    if (title, body) == (pinned.title, pinned.body):
        return pinned
    log.info(
        "lifecycle: task %s: issue text changed since pickup; the pinned text is used", task.id
    )
    return IssueText(pinned.title, pinned.body, EDITED_NOTE, labels)


async def _announce(run: Run, text: IssueText) -> None:
    note = f"Attempt {run.task.attempts} of {run.ctx.policy.max_attempts} is running."
    if text.note:
        note += f"\n\n{text.note}"
    await show(run.ctx.db, run.github, run.task.id, Phase.RUNNING, note, clock=run.ctx.clock)


async def fail(run: Run, *, error: str = "", limit: str | None = None, retry: bool) -> str:
    return await finish_failed(
        run.ctx,
        run.github,
        run.task.id,
        run.actor,
        error=error,
        limit=limit,
        retry=retry,
        fence=run.fence,
    )


async def no_runtime(run: Run) -> str:
    move = Move(
        TaskState.WAITING_FOR_INFO,
        actor=run.actor,
        detail="no coding runtime is configured",
        data={"question": NO_RUNTIME_NOTICE},
        expect=[TaskState.RUNNING],
        changes={"question": NO_RUNTIME_NOTICE, "pending_decision": None},
        notice=NO_RUNTIME_NOTICE,
        note="No coding runtime is configured.",
        fence=run.fence,
    )
    change = await finish_move(run.ctx, run.github, run.task.id, move)
    return change if isinstance(change, str) else "waiting_for_info: no coding runtime"


async def sandbox_refusal(run: Run) -> str | None:
    """No sandbox, no run: the failure (in words that say how to install it), or None."""
    try:
        warnings = await asyncio.to_thread(ensure_available, run.ctx.policy.sandbox)
    except SandboxUnavailable as exc:
        log.error("lifecycle: task %s: coding run refused: %s", run.task.id, exc)
        return await fail(
            run, error=f"this worker cannot isolate the coding runtime: {exc}", retry=True
        )
    for warning in warnings:
        log.warning("lifecycle: task %s: %s", run.task.id, warning)
        await run.ctx.db.run(_note, run, warning)
    return None


def _note(session: Session, run: Run, text: str) -> None:
    tasks.hold(session, run.task.id, run.fence, run.ctx.clock)
    task = tasks.get_task(session, run.task.id)
    tasks.record(session, task, EventKind.NOTE, actor=run.actor, detail=text, clock=run.ctx.clock)


def failure_text(run: Run, outcome: CodingOutcome) -> str:
    """The worker's words for a failed runtime, with the short reason it declared."""
    text = outcome.error or "the coding runtime failed"
    if outcome.reason:
        text += f" (it said: {run.public(outcome.reason, MAX_REASON)})"
    return text


async def conclude(run: Run, tree: worktree.Worktree, outcome: CodingOutcome) -> str:
    if outcome.status == CodingStatus.LIMIT and outcome.limit in budget.BUDGET_LIMITS:
        return await budget.reached(run, outcome.limit)  # waits for a person
    if outcome.status in (CodingStatus.TIMED_OUT, CodingStatus.LIMIT):
        return await fail(run, limit=outcome.limit or "time", retry=False)
    if outcome.status == CodingStatus.ERROR:
        return await fail(run, error=failure_text(run, outcome), retry=True)
    if outcome.status == CodingStatus.QUESTION:
        return await ask(run, tree, outcome)
    return await _deliver(run, tree, outcome)


async def ask(run: Run, tree: worktree.Worktree, outcome: CodingOutcome) -> str:
    # Keep all the run produced on the branch, checked as a delivery is: what the agent
    # left, committed now, and what the worker committed before (the test command's check
    # commits the agent's work before its second run, which may then ask). The
    # continuation clones the branch, so what is not pushed here is lost to it.
    await worktree.commit_all(tree, f"Work in progress on #{run.task.issue}")
    if await worktree.unpushed(tree):
        if refused := await unpushable(run, tree):
            return await fail(run, error=refused, retry=False)
        await push(run, tree)
    question = run.public_block(outcome.question)
    said = await finish_question(
        run.ctx, run.github, run.task, run.actor, question, fence=run.fence
    )
    decisions = run.repo_env.config.decisions if run.repo_env is not None else None
    await auto_resume.after_question(run.ctx, run.github, run.task.id, decisions)  # opt-in
    return said


async def _deliver(run: Run, tree: worktree.Worktree, outcome: CodingOutcome) -> str:
    task = run.task
    title = run.public(task.title, 200)
    await worktree.commit_all(tree, f"{title} (#{task.issue})")
    summary = await plan_flow.with_plan(run, run.public_block(outcome.summary))
    if await worktree.commits_ahead(tree) == 0:
        error = "the coding runtime finished without changing anything"
        if summary:
            error += f" (it said: {run.public(outcome.summary, MAX_REASON)})"
        return await fail(run, error=error, retry=False)
    if refused := await unpushable(run, tree):
        return await fail(run, error=refused, retry=False)
    await push(run, tree)
    await run.check_lease()
    await open_pull(run, tree.base, title, summary)
    draft = opens_as_draft(run)
    return await finish_delivered(
        run.ctx, run.github, task.id, run.actor, summary=summary, fence=run.fence, draft=draft
    )


async def changed_paths(tree: worktree.Worktree) -> list[str]:
    try:
        return await worktree.changed_paths(tree)
    except worktree.WorktreeError:
        return []
