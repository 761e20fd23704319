"""An update run: the task's run when its pull request conflicts with its moved base
(`base_intake`), on the same branch: the base merged into it, conflicts resolved by the
coding agent, a merge commit pushed.

`run.run_task` asks `pending` first: a task whose `base_updates` row is queued runs
`update` instead of the issue's steps (the row, not the job, says so: a retry or the
reconciler's new job runs the same update). The run opens as every run does (sandbox,
claim and clone, the repository's setup), then:

* the branch moved since the conflict was seen (a person pushed): nothing to update there,
  the task is delivered again and the next look at the base decides;
* the worker merges `origin/<base>` into the branch in its own git directory; a clean
  merge is committed at once, conflicts go to the agent with the files named
  (`base_prompt`);
* after the agent, the worker refuses to go on while a conflicted file still holds a
  conflict marker or the merge is not concluded (a merge commit whose second parent is
  the base), then runs the repository's tests if its config names them; any of these
  leaves the branch as it was and asks a person with one comment on the pull request
  (`base_comment`), the task `waiting_for_info` (a Decision then buys one more update
  run: `base_decision`);
* otherwise the merge commit is pushed (fenced, checked for secrets as any push), the row
  records it, and the task is delivered again.

A question from the agent, or a budget, leaves the branch as it was (nothing half-merged
is pushed) and the task waiting for a person with the update run still queued: the
Decision's run continues it (`UPDATE_GOES_ON`), the same update run with the Decision as
guidance. An error or another limit ends the run as any run's would (steps): a retry runs
the same update. A branch whose head is this update run's own merge (pushed by an attempt
that ended before it recorded the push) is that push, recorded now.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.lifecycle import auto_resume, base_store, branch, repo_tests, steps, tasks, worktree
from bot.lifecycle.base_comment import shown_ref
from bot.lifecycle.base_intake import comment_stop, needs_human_question
from bot.lifecycle.base_models import BaseUpdate, UpdateState, UpdateVerdict
from bot.lifecycle.base_prompt import update_prompt
from bot.lifecycle.coding import CodingOutcome, CodingStatus
from bot.lifecycle.coding_step import code
from bot.lifecycle.finish import decide, finish_delivered, finish_question
from bot.lifecycle.progress import Phase
from bot.lifecycle.run_guidance import Guidance, run_label
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, publish, show

log = logging.getLogger(__name__)
# A line git's merge writes around a conflict (`merge.conflictStyle` merge or diff3).
_MARKER = re.compile(rb"^(?:<{7}|>{7}|\|{7})(?: |$)|^={7}$", re.MULTILINE)
MAX_SCANNED = 20 * 1024 * 1024  # bytes of one file read for markers; larger: unresolved
# Where the task is when its update run is not over: queued again for a retry, which runs
# the same update; waiting for a person (the agent asked a question, the run hit a budget,
# found no runtime), whose Decision's run continues the same update run (same run number,
# the Decision as guidance); or running already, resumed by a Decision faster than this
# line (as ci_run.FIX_GOES_ON).
UPDATE_GOES_ON = frozenset({TaskState.QUEUED, TaskState.WAITING_FOR_INFO, TaskState.RUNNING})


@dataclass(frozen=True)
class Merge:
    base_ref: str
    base_sha: str  # the base commit merged
    conflicts: list[str]  # the files the merge left conflicted


def pending(run: Run) -> BaseUpdate | None:
    """The update run this run of the task is, if it is one."""
    task = run.task
    return run.ctx.db.call(base_store.pending_update, task.id, task.generation)


async def update(run: Run, row: BaseUpdate) -> str:
    """The whole update run; returns what happened, in words."""
    text = await steps.issue_text(run)
    await _announce(run, row)

    async def moved(tree: worktree.Worktree) -> str | None:
        if tree.remote.branch_sha == row.head_sha:
            return None
        if await _own_merge(tree, row):
            return await _pushed_before(run, row, tree)
        return await _superseded(run, row, tree)

    guidance = Guidance.of(run.task)
    opened = await steps.open_workspace(
        run, text, check_clone=moved, with_decision=guidance is None
    )
    if isinstance(opened, steps.Ended):
        return await _ended(run, row, opened.said)
    tree = opened.tree
    merge = await _begin_merge(tree, row.base_ref)
    if merge.conflicts:
        prompt = update_prompt(
            opened.prompt,
            pr_number=row.pr_number,
            base_ref=row.base_ref,
            files=merge.conflicts,
            guidance=guidance,
        )
        outcome = await code(run, tree, prompt, opened.remaining)
        await steps.recorded(run, tree, prompt, outcome)
        if outcome.status != CodingStatus.DONE:
            await _abort(tree)  # nothing half-merged is pushed by the run's end
            if outcome.status == CodingStatus.QUESTION:
                said = await _ask(run, row, outcome)
            else:
                said = await steps.conclude(run, tree, outcome)
            concluded = await _ended(run, row, said)
            await steps.after_conclusion(run)
            return concluded
    concluded = await _conclude_merge(run, tree, merge)
    if concluded:
        return await _unresolved(run, row, tree, merge, concluded)
    return await _push(run, row, tree, merge)


async def _announce(run: Run, row: BaseUpdate) -> None:
    which = run_label(
        row.run_number,
        run.ctx.settings.base_update_runs,
        one_more=row.verdict == UpdateVerdict.DECISION,
        task=run.task,
    )
    note = (
        f"Update run {which} is merging `{shown_ref(row.base_ref)}` "
        f"({row.base_sha[:12]}) into this branch: the pull request conflicts with it."
    )
    await show(run.ctx.db, run.github, run.task.id, Phase.RUNNING, note, clock=run.ctx.clock)


async def _begin_merge(tree: worktree.Worktree, base_ref: str) -> Merge:
    """`origin/<base>` merged into the branch in the worker's git directory, not committed:
    the merged files (conflict markers where git could not merge) in the agent's tree."""
    base = await worktree.tree_git(tree, "rev-parse", "--verify", f"origin/{base_ref}^{{commit}}")
    await worktree.tree_git(
        tree, "merge", "--no-ff", "--no-commit", "--no-verify", base, check=False
    )
    if not await _merging(tree):
        raise worktree.WorktreeError(f"git could not begin merging {base[:12]}")
    return Merge(base_ref, base, await _unmerged(tree))


async def _unmerged(tree: worktree.Worktree) -> list[str]:
    """The index's conflicted paths, each verbatim: `-z` (git's usual output quotes a name
    with an unusual character, which then names no file and would pass for deleted), one
    entry "<mode> <sha> <stage>\t<path>" per stage, so no name starts the output."""
    listed = await worktree.tree_git(tree, "ls-files", "-z", "--unmerged")
    paths = [entry.split("\t", 1)[1] for entry in listed.split("\0") if "\t" in entry]
    return list(dict.fromkeys(paths))


async def _merging(tree: worktree.Worktree) -> bool:
    found = await worktree.tree_git(tree, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
    return bool(found)


async def _abort(tree: worktree.Worktree) -> None:
    """The branch's tree as it was before the merge (what the agent changed goes too)."""
    if await _merging(tree):
        await worktree.tree_git(tree, "merge", "--abort", check=False)
    await worktree.tree_git(tree, "reset", "--quiet", "--hard", "HEAD")


def markers_left(root: Path, files: list[str]) -> list[str]:
    """The conflicted files that still hold a conflict marker (or cannot be read as a
    file of the tree: a link, in a folder linked out of it, a name not UTF-8, which git's
    output no longer spells, or too large to scan)."""
    return [name for name in files if _left(root.resolve(), name)]


def _left(inside: Path, name: str) -> bool:
    path = inside / name
    if "\ufffd" in name or not path.parent.resolve().is_relative_to(inside):
        return True
    if not path.exists() and not path.is_symlink():
        return False  # deleted: a resolution
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_SCANNED:
        return True
    return _MARKER.search(path.read_bytes()) is not None


async def _conclude_merge(run: Run, tree: worktree.Worktree, merge: Merge) -> str:
    """Commit the merge (what the agent left in the tree); why it cannot be, or ""."""
    left = await asyncio.to_thread(markers_left, tree.path, merge.conflicts)
    if left:
        names = ", ".join(left[:10]) + (" and more" if len(left) > 10 else "")
        return f"conflict markers are left in {run.public(names, 300)}"
    message = f"Merge {shown_ref(merge.base_ref)} into {tree.branch} (#{run.task.issue})"
    await worktree.commit_all(tree, message)
    parents = (await worktree.tree_git(tree, "rev-list", "--parents", "-n", "1", "HEAD")).split()
    if await _merging(tree) or parents[2:3] != [merge.base_sha]:
        return "the merge was not concluded"
    if await repo_tests.check(run, tree):
        return "the repository's tests failed on the merge"
    return ""


async def _push(run: Run, row: BaseUpdate, tree: worktree.Worktree, merge: Merge) -> str:
    if refused := await branch.unpushable(run, tree):
        return await _ended(run, row, await steps.fail(run, error=refused, retry=False))
    await branch.push(run, tree)
    head = tree.remote.branch_sha
    await _conclude(run, row, UpdateState.PUSHED, result_sha=head, conflicts=merge.conflicts)
    resolved = f", resolving conflicts in {len(merge.conflicts)} file(s)" if merge.conflicts else ""
    summary = (
        f"Merged `{shown_ref(row.base_ref)}` ({merge.base_sha[:12]}) into the branch{resolved}."
    )
    said = await finish_delivered(
        run.ctx, run.github, run.task.id, run.actor, summary=summary, fence=run.fence
    )
    await steps.after_conclusion(run)
    return said


async def _conclude(run: Run, row: BaseUpdate, state: UpdateState, **changes: object) -> None:
    fence, clock = run.fence, run.ctx.clock
    await run.ctx.db.run(base_store.conclude, row.id, state, clock, fence=fence, **changes)


async def _ask(run: Run, row: BaseUpdate, outcome: CodingOutcome) -> str:
    """The agent asked a question: the task waits for a person with it, the update run
    queued (`_ended`), so the Decision's run is this update run again, from a fresh merge
    (the merge begun here was aborted: no half-resolved work is pushed to keep)."""
    base = shown_ref(row.base_ref)
    question = (
        f"{run.public_block(outcome.question)}\n\n"
        f"(Asked by update run {row.run_number}, merging `{base}` into the branch of pull "
        f"request #{row.pr_number}; nothing was pushed. A Decision continues that update run "
        "with your answer as its guidance.)"
    )
    said = await finish_question(
        run.ctx, run.github, run.task, run.actor, question, fence=run.fence
    )
    decisions = run.repo_env.config.decisions if run.repo_env is not None else None
    await auto_resume.after_question(run.ctx, run.github, run.task.id, decisions)  # opt-in
    return said


async def _ended(run: Run, row: BaseUpdate, said: str) -> str:
    """The run ended as a run does (failed, asked, stopped, a limit): the update is over
    unless the task goes on (`UPDATE_GOES_ON`: a retry or a Decision's run continues it)."""
    await run.ctx.db.run(_end_update, run.task.id, row, run.fence, run.ctx.clock)
    return said


def _end_update(session: Session, task_id: int, row: BaseUpdate, fence: str, clock: Clock) -> None:
    if tasks.get_task(session, task_id).state not in UPDATE_GOES_ON:
        base_store.conclude(session, row.id, UpdateState.ENDED, clock, fence=fence)


async def _own_merge(tree: worktree.Worktree, row: BaseUpdate) -> bool:
    """Whether the branch's head is this update's merge, pushed by an earlier attempt of
    the run that ended before it recorded the push (a crash, a lost lease): a merge commit
    whose first parent is the conflicting head and whose second is on the base (the base
    the attempt merged, `row.base_sha` or a later one). A person's merge of the base onto
    the same head is the same update, taken as done."""
    head = tree.remote.branch_sha
    if not head:  # the branch is gone
        return False
    listed = await worktree.tree_git(tree, "rev-list", "--parents", "-n", "1", head)
    parents = listed.split()[1:]
    if len(parents) != 2 or parents[0] != row.head_sha:
        return False
    base = f"origin/{row.base_ref}"
    common = await worktree.tree_git(tree, "merge-base", parents[1], base, check=False)
    return common == parents[1]


async def _pushed_before(run: Run, row: BaseUpdate, tree: worktree.Worktree) -> str:
    """The push an earlier attempt made, recorded as `_push` would have (the chain goes on
    from its merge commit), and the task delivered again: no second update of the pair."""
    head = tree.remote.branch_sha
    log.info("lifecycle: task %s: the branch holds this update's merge %s", run.task.id, head[:12])
    await _conclude(run, row, UpdateState.PUSHED, result_sha=head)
    summary = (
        f"Merged `{shown_ref(row.base_ref)}` into the branch ({head[:12]}, pushed by update "
        f"run {row.run_number} before it ended)."
    )
    return await finish_delivered(
        run.ctx, run.github, run.task.id, run.actor, summary=summary, fence=run.fence
    )


async def _superseded(run: Run, row: BaseUpdate, tree: worktree.Worktree) -> str:
    moved = tree.remote.branch_sha[:12] or "nothing"
    log.info("lifecycle: task %s: the branch moved to %s; no update run", run.task.id, moved)
    await _conclude(run, row, UpdateState.SUPERSEDED)
    return await finish_delivered(
        run.ctx,
        run.github,
        run.task.id,
        run.actor,
        summary=f"The branch moved to {moved} before the update run.",
        fence=run.fence,
    )


async def _unresolved(
    run: Run, row: BaseUpdate, tree: worktree.Worktree, merge: Merge, why: str
) -> str:
    """Nothing is pushed; a person is asked with one comment on the pull request (or, with
    an operator's terminate recorded meanwhile, the task ends as they asked: `decide`)."""
    await _abort(tree)
    reason = f"update run {row.run_number} could not conclude the merge: {why}"
    await _conclude(run, row, UpdateState.UNRESOLVED, reason=reason, conflicts=merge.conflicts)
    move = Move(
        TaskState.WAITING_FOR_INFO,
        actor=run.actor,
        detail=reason,
        data={"head_sha": row.head_sha, "pr_number": row.pr_number},
        expect=[TaskState.RUNNING],
        changes={
            "question": needs_human_question(row.pr_number, shown_ref(row.base_ref), reason),
            "pending_decision": None,
        },
        note=f"The pull request still conflicts with `{shown_ref(row.base_ref)}`: a person "
        "is needed.",
        fence=run.fence,
    )
    decided = await decide(run.ctx, run.github, run.task.id, move)
    if isinstance(decided, str):
        return decided
    if decided.terminated_by is None:
        stopped = await run.ctx.db.run(base_store.row_at, row.task_id, row.base_sha, row.head_sha)
        if stopped is not None:
            await comment_stop(run.ctx.db, run.github, run.task.repo, stopped)
        await publish(run.ctx.db, run.github, decided.moved, clock=run.ctx.clock)
    await steps.after_conclusion(run)
    if decided.terminated_by is not None:
        return f"terminated as {decided.terminated_by} asked"
    return f"waiting_for_info: {reason}"
