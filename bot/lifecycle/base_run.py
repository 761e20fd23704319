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
  the base), then runs the repository's tests if its config names them; any of these, or
  a question from the agent, leaves the branch as it was and asks a person with one
  comment on the pull request (`base_comment`), the task `waiting_for_info`;
* otherwise the merge commit is pushed (fenced, checked for secrets as any push), the row
  records it, and the task is delivered again.

An error or a limit ends the run as any run's would (steps): a retry runs the same update.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.lifecycle import base_store, branch, repo_tests, steps, tasks, worktree
from bot.lifecycle.base_comment import shown_ref
from bot.lifecycle.base_intake import comment_stop, needs_human_question
from bot.lifecycle.base_models import BaseUpdate, UpdateState
from bot.lifecycle.base_prompt import update_prompt
from bot.lifecycle.coding import CodingStatus
from bot.lifecycle.coding_step import code
from bot.lifecycle.finish import decide, finish_delivered
from bot.lifecycle.progress import Phase
from bot.lifecycle.scope import Run
from bot.lifecycle.states import TaskState
from bot.lifecycle.transition import Move, publish, show

log = logging.getLogger(__name__)
# A line git's merge writes around a conflict (`merge.conflictStyle` merge or diff3).
_MARKER = re.compile(rb"^(?:<{7}|>{7}|\|{7})(?: |$)|^={7}$", re.MULTILINE)
MAX_SCANNED = 20 * 1024 * 1024  # bytes of one file read for markers; larger: unresolved
# Where the task is when its update run is not over: queued again for a retry (which runs
# the same update) or running already (resumed meanwhile).
UPDATE_GOES_ON = frozenset({TaskState.QUEUED, TaskState.RUNNING})


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
        return await _superseded(run, row, tree)

    opened = await steps.open_workspace(run, text, check_clone=moved)
    if isinstance(opened, steps.Ended):
        return await _ended(run, row, opened.said)
    tree = opened.tree
    merge = await _begin_merge(tree, row.base_ref)
    if merge.conflicts:
        prompt = update_prompt(
            opened.prompt, pr_number=row.pr_number, base_ref=row.base_ref, files=merge.conflicts
        )
        outcome = await code(run, tree, prompt, opened.remaining)
        await steps.recorded(run, tree, prompt, outcome)
        if outcome.status == CodingStatus.QUESTION:
            asked = f"the coding agent asked: {run.public(outcome.question, 300)}"
            return await _unresolved(run, row, tree, merge, asked)
        if outcome.status != CodingStatus.DONE:
            await _abort(tree)  # nothing half-merged is pushed by the run's end
            return await _ended(run, row, await steps.conclude(run, tree, outcome))
    concluded = await _conclude_merge(run, tree, merge)
    if concluded:
        return await _unresolved(run, row, tree, merge, concluded)
    return await _push(run, row, tree, merge)


async def _announce(run: Run, row: BaseUpdate) -> None:
    which = f"{row.run_number} of {run.ctx.settings.base_update_runs}"
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


async def _ended(run: Run, row: BaseUpdate, said: str) -> str:
    """The run ended as a run does (failed, stopped, a limit): the update is over unless
    the task goes on (`UPDATE_GOES_ON`: a retry runs the same update)."""
    await run.ctx.db.run(_end_update, run.task.id, row, run.fence, run.ctx.clock)
    return said


def _end_update(session: Session, task_id: int, row: BaseUpdate, fence: str, clock: Clock) -> None:
    if tasks.get_task(session, task_id).state not in UPDATE_GOES_ON:
        base_store.conclude(session, row.id, UpdateState.ENDED, clock, fence=fence)


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
