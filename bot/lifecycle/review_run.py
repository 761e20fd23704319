"""A review run: the task's agent answers a review of its pull request on the same branch.

`run_task` takes this path instead of the issue's when the task's pull request exists and
review threads are open (`review_pickup.has_review_work`), so the immediate delivery of a
task whose pull request exists never swallows a review. The steps: the threads taken up
and pinned (`review_pickup.pick_up`), a fresh clone of the branch as the remote has it now
(so a person's push is the base), the issue's prompt with the review wrapped as untrusted
data (`review_prompt`), the agent (resuming its recorded session: the task's
`runtime_session` reaches presets as STEELFRAME_RESUME_SESSION), then:

- what the agent changed is committed on top of the remote head and pushed (fenced, as
  every push: a branch someone pushed to meanwhile refuses it, and the retried run starts
  from the new head), so a person's commits are never overwritten;
- each thread gets one reply (`thread_answers.answer_threads`, text through
  `Run.public_block`) from the agent's answers file (`review_answers`);
- the task is delivered again, or waits for a Decision when the agent asked something or
  the run changed nothing and said nothing (no empty push).
"""

from __future__ import annotations

import asyncio
import logging

from bot.lifecycle import worktree
from bot.lifecycle.branch import push, unpushable
from bot.lifecycle.coding import CodingOutcome, CodingStatus
from bot.lifecycle.coding_step import code
from bot.lifecycle.finish import finish_delivered, finish_move, finish_question
from bot.lifecycle.models import ReviewThread, ThreadKind, ThreadState
from bot.lifecycle.progress import Phase
from bot.lifecycle.public_text import defang
from bot.lifecycle.review_answers import Settled, settle, take_answers, thread_key
from bot.lifecycle.review_pickup import has_review_work, pick_up
from bot.lifecycle.review_prompt import review_section
from bot.lifecycle.reviews import (
    DISMISSED_STATE,
    before_pickup,
    decline_dismissed,
    dismissed_reviews,
)
from bot.lifecycle.run_log import record
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.steps import Ended, ask, conclude, fail, issue_text, open_workspace
from bot.lifecycle.thread_answers import ThreadAnswer, answer_threads, settle_replied
from bot.lifecycle.transition import Move, show

log = logging.getLogger(__name__)
NOTHING = (
    "The review run changed nothing and answered no thread. Publish a Decision on this "
    "issue to say how to go on with the review."
)


async def wanted(run: Run) -> bool:
    return bool(await run.ctx.db.run(has_review_work, run.task.id))


async def work_review(run: Run) -> str:
    """The whole of a started review run; returns what happened, in words."""
    ctx = run.ctx
    text = await issue_text(run)
    job = run.task.job_id or run.holder.id
    # A retry after a worker died past a reply: those threads were answered in public.
    replied = await settle_replied(ctx.db, run.github, run.task, clock=ctx.clock)
    threads = await pick_up(ctx.db, run.github, run.task, job=job, clock=ctx.clock)
    asked = _questions(replied)
    if not threads:  # answered meanwhile (a race, or that retry): nothing to run
        return await _end_answered(run, asked)
    await _announce(run, threads)
    opened = await open_workspace(run, text)
    if isinstance(opened, Ended):
        return opened.said
    tree = opened.tree
    prompt = opened.prompt + review_section(threads)
    outcome = await code(run, tree, prompt, opened.remaining)
    await record(run, outcome)
    run.watch.check()
    given = await asyncio.to_thread(take_answers, tree.path)
    if outcome.status == CodingStatus.QUESTION:
        question = run.public_block(outcome.question)
        asked_now = await _without_dismissed(run, threads, _asked(threads, question))
        if not asked_now.answers:  # every review it was about was dismissed meanwhile
            return await _moot(run, threads)
        await _answer(run, threads, asked_now, job)
        return await ask(run, tree, outcome)
    if outcome.status != CodingStatus.DONE:
        return await conclude(run, tree, outcome)  # failed: retried or final, as any run
    pushed = await _push_new(run, tree)
    if isinstance(pushed, Refused):
        return await fail(run, error=pushed.reason, retry=False)
    settled = await _without_dismissed(
        run, threads, settle(threads, given, pushed, run.public_block)
    )
    await _answer(run, threads, settled, job)
    return await _end(run, Settled(settled.answers, asked + settled.questions), pushed, outcome)


def _questions(replied: list[ThreadAnswer]) -> list[str]:
    """The questions a run before this one replied with (once each: a question is every
    thread's of its run)."""
    return list(dict.fromkeys(a.text for a in replied if a.state == ThreadState.NEEDS_OPERATOR))


async def _end_answered(run: Run, questions: list[str]) -> str:
    """Every thread is settled without this run: delivered again, or waiting for a Decision
    on the questions the run before it replied with but never turned into the wait."""
    ctx = run.ctx
    if questions:
        question = _joined(run, questions)
        return await finish_question(
            ctx, run.github, run.task, run.actor, question, fence=run.fence
        )
    return await finish_delivered(ctx, run.github, run.task.id, run.actor, summary="")


def _joined(run: Run, questions: list[str]) -> str:
    """The questions as one notice, defanged once more as a whole: each was made public on
    its own (and closed, `public_text.defang`), but one stored by an older worker may not
    be, and an unclosed fence in one would make the next one's fenced image live."""
    return defang("\n\n".join(questions), run.place)


async def _announce(run: Run, threads: list[ReviewThread]) -> None:
    who = ", ".join(sorted({f"@{t.author}" for t in threads})) or "a reviewer"
    note = f"Answering the review by {who} ({len(threads)} thread(s))."
    await show(run.ctx.db, run.github, run.task.id, Phase.RUNNING, note, clock=run.ctx.clock)


class Refused:
    def __init__(self, reason: str) -> None:
        self.reason = reason


async def _push_new(run: Run, tree: worktree.Worktree) -> str | Refused | None:
    """Commit what the agent left and push it: the new head, None when the agent changed
    nothing, or why it may not be pushed. The worker's commit is made in its own git
    directory on top of the remote head it cloned (the agent's own commits are only files
    to it), so a person's commits on the branch are always the new commit's ancestors."""
    if not await worktree.commit_all(tree, f"Answer the review of #{run.task.issue}"):
        return None
    if refused := await unpushable(run, tree):
        return Refused(refused)
    await push(run, tree)
    return tree.remote.branch_sha  # the pushed head


def _asked(threads: list[ReviewThread], question: str) -> Settled:
    """The agent stopped with a question: every thread of the run waits on it."""
    answers = [
        ThreadAnswer(ThreadKind(t.kind), t.root_id, ThreadState.NEEDS_OPERATOR, question)
        for t in threads
    ]
    return Settled(answers, [question])


async def _without_dismissed(run: Run, threads: list[ReviewThread], settled: Settled) -> Settled:
    """`settled` without the answers (and questions) to reviews dismissed on GitHub while
    the run worked: nobody is to be answered on them. Read just before the replies are
    posted, from the ledger (the dismissal webhook declined their threads, `reviews._dismiss`)
    and from GitHub itself (a lost or late webhook: their threads are declined here)."""
    gone = await _dismissed(run, threads)
    if not gone:
        return settled
    log.info("lifecycle: task %s: reviews %s dismissed meanwhile: not answered", run.task.id, gone)
    dropped = [t for t in threads if _review_of(t) in gone]  # its own text and line comments
    roots = {(ThreadKind(t.kind), t.root_id) for t in dropped}
    answers = [a for a in settled.answers if (a.kind, a.root_id) not in roots]
    keys = [thread_key(t) for t in dropped]
    questions = [q for q in settled.questions if not any(q.startswith(f"On {k} (") for k in keys)]
    return Settled(answers, questions)


def _review_of(thread: ReviewThread) -> int | None:
    """The review a thread belongs to: a review's own text, or a line comment it made (None:
    a comment made outside a review, or one whose review is not known)."""
    return thread.root_id if thread.kind == ThreadKind.REVIEW else thread.review_id


async def _dismissed(run: Run, threads: list[ReviewThread]) -> set[int]:
    """The run's reviews that are dismissed: as the webhook recorded, or as GitHub says
    now (`pulls/list-reviews`, state DISMISSED)."""
    ctx, task = run.ctx, run.task
    of_reviews = [t for t in threads if _review_of(t) is not None]
    reviews = sorted({r for t in threads if (r := _review_of(t)) is not None})
    if not reviews:
        return set()
    recorded = await ctx.db.run(dismissed_reviews, task.id, reviews)
    live: set[int] = set()
    for number in sorted({t.pr_number for t in of_reviews}):
        found = await run.github.list_reviews(task.repo, number)
        live |= {r.id for r in found if r.state.upper() == DISMISSED_STATE}
    unrecorded = sorted((live & set(reviews)) - recorded)
    if unrecorded:
        declined = await ctx.db.run(decline_dismissed, task.id, unrecorded, ctx.clock)
        log.info("lifecycle: task %s: GitHub says reviews %s are dismissed", task.id, declined)
    return recorded | set(unrecorded)


async def _moot(run: Run, threads: list[ReviewThread]) -> str:
    """The agent asked, but every review it was about was dismissed meanwhile: no question
    (nobody needs its answer) and nothing pushed; the task goes back to the state it had
    before the review pickup, with why in its events."""
    ctx = run.ctx
    keys = ", ".join(thread_key(t) for t in threads)
    why = f"the coding agent's question is moot: every review it was about ({keys}) was dismissed"
    before = await ctx.db.run(before_pickup, run.task.id)
    log.info("lifecycle: task %s: %s; back to %s", run.task.id, why, before.state)
    task = run.task
    if before.state == TaskState.FAILED:
        move = Move(
            TaskState.FAILED,
            actor=run.actor,
            detail=f"{why}; failed as before the review: {before.error}"[:500],
            data={"error": before.error, "limit": None},
            expect=[TaskState.RUNNING],
            changes={"last_error": before.error, "pending_decision": None},
            note=f"Failed: {before.error}",
            fence=run.fence,
        )
    else:
        move = Move(
            TaskState.DELIVERED,
            actor=run.actor,
            detail=f"{why}; delivered as before the review: pull request {task.pr_url}",
            data={"pr_url": task.pr_url, "pr_number": task.pr_number, "summary": ""},
            expect=[TaskState.RUNNING],
            changes={"last_error": None, "pending_decision": None},
            note=why[:1].upper() + why[1:] + ".",
            fence=run.fence,
        )
    change = await finish_move(ctx, run.github, task.id, move)
    return change if isinstance(change, str) else f"{before.state}: {why}"


async def _answer(run: Run, threads: list[ReviewThread], settled: Settled, job: str) -> None:
    if not threads:
        return
    await run.check_lease()
    await answer_threads(
        run.ctx.db, run.github, run.task.id, settled.answers, job=job, clock=run.ctx.clock
    )


async def _end(run: Run, settled: Settled, pushed: str | None, outcome: CodingOutcome) -> str:
    ctx = run.ctx
    # No answer left (every review of the run was dismissed meanwhile): nothing to ask.
    nothing = (
        pushed is None
        and bool(settled.answers)
        and all(a.state == ThreadState.NEEDS_OPERATOR for a in settled.answers)
    )
    if settled.questions or nothing:
        question = _joined(run, settled.questions) if settled.questions else NOTHING
        task = run.task
        return await finish_question(ctx, run.github, task, run.actor, question, fence=run.fence)
    summary = run.public_block(outcome.summary)
    return await finish_delivered(
        ctx, run.github, run.task.id, run.actor, summary=summary, fence=run.fence
    )
