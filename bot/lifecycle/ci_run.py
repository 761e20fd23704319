"""A fix run: the task's run when failing CI on its pull request started it
(`ci_intake`), on the same branch, with the CI evidence pinned into the prompt.

`run.run_task` asks `pending` first: a task whose `ci_fixes` row is queued runs `fix`
instead of the issue's steps (the row, not the job, says so: a retry or the reconciler's
new job runs the same fix). The run is the issue run's steps (sandbox, claim and clone,
the repository's setup, the coding runtime, its log and usage) with another end:

* the branch moved since the failure (a person pushed): nothing to fix there, the task is
  delivered again and the new head's CI decides;
* the runtime changed nothing: no push, the task goes `waiting_for_info` with the pull
  request's summary (a run that changes nothing would fail the same way again);
* it committed: the commits are pushed (fenced, checked for secrets as any push) to the
  pull request's branch, the row records the commit, and the task is delivered again. A
  failure on that commit continues the chain, which the bound counts.

A question, an error or a limit ends the run as any run's would (steps).
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.lifecycle import branch, ci_store, steps, tasks, worktree
from bot.lifecycle.ci_intake import needs_human_question, post_ci_summary
from bot.lifecycle.ci_models import CiFix, CiFixState, CiVerdict, names_line
from bot.lifecycle.ci_prompt import fix_prompt
from bot.lifecycle.coding import CodingOutcome, CodingStatus
from bot.lifecycle.coding_step import code
from bot.lifecycle.finish import decide, finish_delivered
from bot.lifecycle.progress import Phase
from bot.lifecycle.run_guidance import Guidance, run_label
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, publish, show

log = logging.getLogger(__name__)


def pending(run: Run) -> CiFix | None:
    """The fix run this run of the task is, if it is one."""
    task = run.task
    return run.ctx.db.call(ci_store.pending_fix, task.id, task.generation)


async def fix(run: Run, row: CiFix) -> str:
    """The whole fix run; returns what happened, in words."""
    text = await steps.issue_text(run)
    await _announce(run, row)

    async def moved(tree: worktree.Worktree) -> str | None:
        """The branch moved since the failure (a person pushed): nothing to fix there. Where
        this fix run left it before it waited for a person (its work so far) is its own."""
        if tree.remote.branch_sha in (row.head_sha, row.result_sha):
            return None
        return await _superseded(run, row, tree)

    guidance = Guidance.of(run.task)
    opened = await steps.open_workspace(
        run, text, check_clone=moved, with_decision=guidance is None
    )
    if isinstance(opened, steps.Ended):
        return await _ended(run, row, opened.said)
    tree = opened.tree
    prompt = fix_prompt(opened.prompt, row, guidance)
    outcome = await code(run, tree, prompt, opened.remaining)
    await steps.recorded(run, tree, prompt, outcome)
    if outcome.status != CodingStatus.DONE:
        said = await steps.conclude(run, tree, outcome)
        concluded = await _ended(run, row, said, pushed=tree.remote.branch_sha)
    else:
        concluded = await _push_fix(run, row, tree, outcome)
    await steps.after_conclusion(run)
    return concluded


async def _announce(run: Run, row: CiFix) -> None:
    which = run_label(
        row.run_number,
        run.ctx.settings.ci_fix_runs,
        one_more=row.verdict == CiVerdict.DECISION,
        task=run.task,
    )
    note = (
        f"Fix run {which} for failing CI "
        f"({run.public(names_line(row), 200)}) on {row.head_sha[:12]} is running."
    )
    await show(run.ctx.db, run.github, run.task.id, Phase.RUNNING, note, clock=run.ctx.clock)


async def _ended(run: Run, row: CiFix, said: str, *, pushed: str | None = None) -> str:
    """The run ended as a run does (failed, asked, stopped): the fix is over, unless it goes
    on (`FIX_GOES_ON`). `pushed`: the branch's head as the run left it (a question pushes
    the work so far, which the continuation starts from)."""
    await run.ctx.db.run(_end_fix, run.task.id, row, pushed, run.fence, run.ctx.clock)
    return said


# Where the task is when its fix run is not over: queued again for a retry, which runs the
# same fix; waiting for a person (the run asked a question, hit a budget, found no runtime),
# whose Decision's run continues the same fix run (same evidence, same run number, the
# Decision as guidance); or running already, resumed by a Decision that was faster than
# this line (an auto-resume's, docs/lifecycle.md "Answers drafted from past Decisions").
FIX_GOES_ON = frozenset({TaskState.QUEUED, TaskState.WAITING_FOR_INFO, TaskState.RUNNING})


def _end_fix(
    session: Session, task_id: int, row: CiFix, pushed: str | None, fence: str, clock: Clock
) -> None:
    state = tasks.get_task(session, task_id).state
    if state not in FIX_GOES_ON:
        ci_store.conclude(session, row.id, CiFixState.ENDED, clock, fence=fence)
    elif state == TaskState.WAITING_FOR_INFO and pushed and pushed != row.head_sha:
        ci_store.pushed_so_far(session, row.id, pushed, clock, fence=fence)


async def _conclude(run: Run, row: CiFix, state: CiFixState, **changes: object) -> None:
    """Record how the fix ended, while this run holds the task (ci_store.conclude)."""
    fence, clock = run.fence, run.ctx.clock
    await run.ctx.db.run(ci_store.conclude, row.id, state, clock, fence=fence, **changes)


async def _superseded(run: Run, row: CiFix, tree: worktree.Worktree) -> str:
    moved = tree.remote.branch_sha[:12] or "nothing"
    log.info("lifecycle: task %s: the branch moved to %s; no fix run", run.task.id, moved)
    await _conclude(run, row, CiFixState.SUPERSEDED)
    return await finish_delivered(
        run.ctx,
        run.github,
        run.task.id,
        run.actor,
        summary=f"The branch moved to {moved} before the fix run; its CI decides.",
        fence=run.fence,
    )


async def _push_fix(run: Run, row: CiFix, tree: worktree.Worktree, outcome: CodingOutcome) -> str:
    checks = run.public(names_line(row), 150)
    await worktree.commit_all(tree, f"Fix failing CI ({checks}) for #{run.task.issue}")
    head = await worktree.tree_git(tree, "rev-parse", "HEAD")
    if head == row.head_sha:
        return await _unchanged(run, row, outcome)
    if refused := await branch.unpushable(run, tree):
        return await _ended(run, row, await steps.fail(run, error=refused, retry=False))
    await branch.push(run, tree)
    await _conclude(run, row, CiFixState.PUSHED, result_sha=head)
    summary = run.public_block(outcome.summary) or f"Pushed a fix for the failing {checks}."
    return await finish_delivered(
        run.ctx, run.github, run.task.id, run.actor, summary=summary, fence=run.fence
    )


async def _unchanged(run: Run, row: CiFix, outcome: CodingOutcome) -> str:
    """Nothing to push: no empty push, no second try; a person is asked (or, with an
    operator's terminate recorded meanwhile, the task ends as they asked: `decide`)."""
    reason = f"fix run {row.run_number} changed nothing"
    if outcome.summary:
        reason += f" (it said: {run.public(outcome.summary, 200)})"
    await _conclude(run, row, CiFixState.UNCHANGED, reason=reason)
    question = needs_human_question(row.pr_number, reason)
    move = Move(
        TaskState.WAITING_FOR_INFO,
        actor=run.actor,
        detail=reason,
        data={"head_sha": row.head_sha, "pr_number": row.pr_number, "fix_run": row.run_number},
        expect=[TaskState.RUNNING],
        changes={"question": question, "pending_decision": None},
        note=f"CI still fails and {reason}: a person is needed.",
        fence=run.fence,
    )
    # Decided as any run's ending (`decide`); shown on GitHub once the pull request's
    # summary says why (below). A terminate in its place is shown by `decide`.
    decided = await decide(run.ctx, run.github, run.task.id, move)
    if isinstance(decided, str):
        return decided
    if decided.terminated_by is not None:
        return f"terminated as {decided.terminated_by} asked"
    task = await run.ctx.db.run(tasks.get_task, run.task.id)
    await post_ci_summary(
        run.ctx.db,
        run.github,
        task,
        row.head_sha,
        redactor=run.ctx.redactor,
        github_api_url=run.ctx.settings.github_api_url,
    )
    await publish(run.ctx.db, run.github, decided.moved, clock=run.ctx.clock)
    return f"waiting_for_info: {reason}"
