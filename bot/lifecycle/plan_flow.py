"""Plan-first runs (issue 34; docs/lifecycle.md, "Plan-first runs").

A task is plan-first when its repository's config says `plan_first: true`, its issue
carries the `steelframe:plan-first` label, STEELFRAME_PLAN_FIRST is on, or its estimate is
over STEELFRAME_APPROVE_ABOVE_USD, as its generation's first run finds them: decided once
and kept for the generation (plan_store.TaskStart). Its first run
is read-only (the sandbox mounts the repository read-only; nothing is committed or pushed)
and ends with a plan, posted on the issue as the task's question. The Decision that
resumes the task settles the plan: "go ahead" (or "Approve plan") approves it as written,
"reject" ends the task, any other text is the operator's edited plan and becomes the
brief. The approved brief is pinned into every later run's prompt and shown in the pull
request's body.

The plan is the agent's text: untrusted, made public (redacted, defanged) before it is
stored or posted, and never read as a command; only the operator's Decision decides.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy.orm import Session

from bot.github.issue_records import Label
from bot.lifecycle import budget, estimate, plan_store, tasks
from bot.lifecycle.coding import CodingOutcome, CodingStatus
from bot.lifecycle.finish import finish_failed, finish_question
from bot.lifecycle.models import Task
from bot.lifecycle.plan_store import Plan, PlanStatus
from bot.lifecycle.public_text import defang
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, apply, publish

log = logging.getLogger(__name__)

PLAN_LABEL = "steelframe:plan-first"
# What the coding command is told in its environment (docs/lifecycle.md, the protocol).
MODE_VARIABLE = "STEELFRAME_MODE"
PLAN_MODE = "plan"
# A Decision that is exactly one of these (case, spaces and a final `.`/`!` aside).
APPROVALS = frozenset(
    {"go ahead", "approve", "approved", "approve plan", "approve the plan", "lgtm", "proceed"}
)
REJECTIONS = frozenset({"reject", "rejected", "reject plan", "reject the plan", "cancel"})
PLAN_INSTRUCTION = (
    "PLAN MODE: this run is read-only. The working tree is mounted read-only and nothing "
    "you do is kept or pushed: do not change files. Read the code, then end with a result "
    'of status "done" whose summary is your plan, under these headings: Files to change, '
    "Approach, Risks, Test to run, Estimate. A person approves, edits or rejects the plan "
    "before any code is written."
)
REJECTED_NOTICE = (
    "The plan was rejected by a Decision: the task ends here and nothing was changed. "
    "Pick the issue up again to start over."
)
_FLAT = re.compile(r"\s+")


@dataclass(frozen=True)
class Gate:
    """What a plan-first task's run does now."""

    plan_run: bool = False  # run the read-only plan run and post its plan
    rejected: bool = False  # the Decision rejected the plan: end the task
    pinned: str = ""  # the approved brief, for the coding run's prompt


class Why(StrEnum):
    """Why a generation is plan-first (recorded with it: plan_store.TaskStart)."""

    CONFIG = "config"  # the repository's `.steelframe/config.yml` says `plan_first: true`
    LABEL = "label"  # the issue carries PLAN_LABEL
    SETTING = "setting"  # STEELFRAME_PLAN_FIRST
    ESTIMATE = "estimate"  # the estimate is over STEELFRAME_APPROVE_ABOVE_USD


async def why_now(run: Run, labels: tuple[Label, ...]) -> Why | None:
    """Why this task would be plan-first now (None: it would not): the repository's config,
    the issue's label, the installation's setting, or an estimate above
    STEELFRAME_APPROVE_ABOVE_USD."""
    config = run.repo_env.config if run.repo_env is not None else None
    if config is not None and config.plan_first:
        return Why.CONFIG
    if any(label.name == PLAN_LABEL for label in labels):
        return Why.LABEL
    if run.ctx.settings.plan_first:
        return Why.SETTING
    return Why.ESTIMATE if await _costly(run) else None


async def plan_first(run: Run, labels: tuple[Label, ...]) -> bool:
    """Whether this generation is plan-first: decided by its first run that gets here and
    kept (plan_store.TaskStart), so a task that started coding never turns into a plan run
    because its estimate grew past the threshold, or the label or the config changed,
    while it waited or was retried."""
    task = run.task
    known = await run.ctx.db.run(plan_store.started, task.id, task.generation)
    if known is None:
        why = await why_now(run, labels)
        known = await run.ctx.db.run(_start, run, why)
        said = f"plan-first ({why})" if why else "coding"
        log.info("lifecycle: task %s generation %s starts %s", task.id, task.generation, said)
    return known.plan_first


def _start(session: Session, run: Run, why: Why | None) -> plan_store.Start:
    tasks.hold(session, run.task.id, run.fence, run.ctx.clock)  # only while the run holds it
    task = run.task
    return plan_store.start(session, task.id, task.generation, reason=why, clock=run.ctx.clock)


async def _costly(run: Run) -> bool:
    """The task will likely cost more than the operator wants spent without approval."""
    threshold = run.ctx.settings.approve_above_usd
    if threshold is None:
        return False
    task = run.task
    agent = run.ctx.policy.coding_agent
    guess = await run.ctx.db.run(estimate.for_repo, task.repo, excluding=task.id, agent=agent)
    return guess is not None and guess.usd_p90 is not None and guess.usd_p90 > threshold


def verdict(decision: str) -> PlanStatus | None:
    """Approved or rejected by the Decision's words; None: the Decision is an edited plan."""
    said = _FLAT.sub(" ", decision.strip().lower()).rstrip(".!").strip()
    if said in APPROVALS:
        return PlanStatus.APPROVED
    if said in REJECTIONS:
        return PlanStatus.REJECTED
    return None


async def gate(run: Run, labels: tuple[Label, ...]) -> Gate:
    """Where a plan-first task stands: no plan yet (plan it), a plan the Decision just
    settled, or one settled before (a retry, or a continuation after a later question)."""
    task = run.task
    plan = await run.ctx.db.run(plan_store.current, task.id, task.generation)
    # Plan-first or not is decided once per generation (`plan_first`); a plan proposed is
    # settled by its Decision in any case (a task of a generation that started before the
    # record was kept included): a rejection never turns into a coding run.
    if plan is None and not await plan_first(run, labels):
        return Gate()
    if plan is None or (plan.status == PlanStatus.PROPOSED and not _answered(task, plan)):
        if budget.for_run(run).exhausted():
            # A budget of 0 means no run at all, and a plan run spends as any run: no plan
            # run; the zero-budget check after the gate (steps.work) stops the task instead.
            return Gate()
        return Gate(plan_run=True)
    if plan.status == PlanStatus.PROPOSED:
        plan = await _settle(run, plan, task.pending_decision or "")
    if plan.status == PlanStatus.REJECTED:
        return Gate(rejected=True)
    return Gate(pinned=pinned(plan.brief or plan.text))


def _answered(task: Task, plan: Plan) -> bool:
    """Whether the task's pending Decision answers its proposed plan: one published after
    the plan was posted, not the Decision its plan run was resumed by (a run that stored
    its plan and died before posting it is run again with that Decision still pending; the
    operator never saw the plan, which plans again)."""
    return bool(task.pending_decision) and task.decision_comment_id != plan.decision_comment_id


async def _settle(run: Run, plan: Plan, decision: str) -> Plan:
    task = run.task
    status = verdict(decision)
    brief = plan.text if status == PlanStatus.APPROVED else None
    if status is None:  # the operator's edited plan: their words, shown like any text
        status, brief = PlanStatus.APPROVED, run.public_block(decision)
    settled = await run.ctx.db.run(
        plan_store.settle,
        task.id,
        task.generation,
        status=status,
        brief=brief,
        comment_id=task.decision_comment_id,
        fence=run.fence,
        clock=run.ctx.clock,
    )
    assert settled is not None  # the row was read above and rows are never deleted
    log.info("lifecycle: task %s: plan %s", task.id, settled.status)
    return settled


def pinned(brief: str) -> str:
    return (
        "\n\nThe approved plan (a person approved it; follow it, and say in your summary "
        "where you had to depart from it):\n<plan>\n" + brief + "\n</plan>\n"
    )


def plan_prompt(prompt: str) -> str:
    return f"{prompt}\n{PLAN_INSTRUCTION}\n"


def question(plan: str, likely: str = "") -> str:
    """The plan as the task's question (finish_question frames it for the issue)."""
    parts = [
        "**Proposed plan** (plan-first: no code is written until a Decision approves it)",
        plan,
    ]
    if likely:
        parts.append(likely)
    parts.append(
        "Publish a Decision: `go ahead` (Approve plan) runs it as written; `reject` ends the "
        "task; any other text is taken as the edited plan and becomes the brief."
    )
    return "\n\n".join(parts)


async def propose(run: Run, outcome: CodingOutcome) -> str:
    """The plan run ended: post its plan as the task's question, or end as any run does."""
    run.watch.check()
    ctx, task = run.ctx, run.task
    if outcome.status == CodingStatus.DONE and outcome.summary.strip():
        plan = run.public_block(outcome.summary)
        await ctx.db.run(_store, run, plan)
        agent = ctx.policy.coding_agent
        guess = await ctx.db.run(estimate.for_repo, task.repo, excluding=task.id, agent=agent)
        text = question(plan, guess.text() if guess is not None else "")
        return await finish_question(ctx, run.github, task, run.actor, text, fence=run.fence)
    if outcome.status == CodingStatus.QUESTION:  # it needs an answer before it can plan
        text = run.public_block(outcome.question)
        return await finish_question(ctx, run.github, task, run.actor, text, fence=run.fence)
    if outcome.status == CodingStatus.LIMIT and outcome.limit in budget.BUDGET_LIMITS:
        return await budget.reached(run, outcome.limit)
    if outcome.status in (CodingStatus.TIMED_OUT, CodingStatus.LIMIT):
        limit = outcome.limit or "time"
        return await finish_failed(
            ctx, run.github, task.id, run.actor, limit=limit, retry=False, fence=run.fence
        )
    error = outcome.error or "the plan run ended without a plan"
    return await finish_failed(
        ctx, run.github, task.id, run.actor, error=error, retry=True, fence=run.fence
    )


def _store(session: Session, run: Run, plan: str) -> None:
    tasks.hold(session, run.task.id, run.fence, run.ctx.clock)  # only while the run holds it
    task = run.task
    after = task.decision_comment_id if task.pending_decision else None
    plan_store.propose(session, task.id, task.generation, plan, run.ctx.clock, after=after)


async def reject(run: Run) -> str:
    """The Decision rejected the plan: the task ends, nothing changed."""
    change = await run.ctx.db.run(
        apply,
        run.task.id,
        Move(
            TaskState.TERMINATED,
            actor=run.actor,
            detail="the plan was rejected by a Decision",
            expect=[TaskState.RUNNING],
            changes={"pending_decision": None},
            notice=REJECTED_NOTICE,
            note="The plan was rejected.",
            fence=run.fence,
        ),
        run.ctx.clock,
    )
    await publish(run.ctx.db, run.github, change, clock=run.ctx.clock)
    return "terminated: plan rejected"


async def with_plan(run: Run, summary: str) -> str:
    """The pull request's summary with the approved plan it followed, if any."""
    plan = await run.ctx.db.run(plan_store.current, run.task.id, run.task.generation)
    if plan is None or plan.status != PlanStatus.APPROVED:
        return summary
    title = "Approved plan (edited by the operator)" if plan.edited else "Approved plan"
    # Both parts were made public (and closed) on their own; the whole is defanged once
    # more, so a part stored by an older worker with a fence left open cannot make the
    # other's fenced image or link live.
    body = f"{summary}\n\n### {title}\n\n{plan.brief or plan.text}".strip()
    return defang(body, run.place)
