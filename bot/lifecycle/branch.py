"""The run's branch on the remote: claimed for the run and cloned (`prepare`), checked before
a push (its size, a known secret: `unpushable`) and pushed only while the run's claim stands
(`push`), and the claim let go when the run ends (`let_go`). Every token is scoped to the
task's repository and added to the redactor.
"""

from __future__ import annotations

import asyncio
import logging

from bot.github.errors import GitHubError
from bot.lifecycle import leases, push_limit, push_scan, tasks, worktree
from bot.lifecycle.run_log import keep_log
from bot.lifecycle.scope import Run

log = logging.getLogger(__name__)
MAX_REFUSAL = 200
SECRET_FOUND = "the changes contained a secret value of the worker, so they were not pushed"


async def prepare(run: Run) -> worktree.Worktree:
    """Claim the task's branch for this run (it holds the lease now), then clone."""
    task = run.task
    info = (await run.github.request("GET", task.repo, "")).data
    url, branch = str(info["clone_url"]), task.branch or tasks.branch_name(task.issue)
    claim_token, clone_token = await repo_token(run, "write"), await repo_token(run, "read")
    await run.check_lease()
    await asyncio.to_thread(
        leases.note_worktree, run.ctx.db, task.id, run.holder, path=str(run.folder)
    )
    base_env = run.ctx.environment.variables  # read at the worker's start, not per job
    fence = await worktree.claim(
        run.folder, url=url, token=claim_token, branch=branch, who=who(run), base_env=base_env
    )
    run.claim = worktree.Claim(url, branch, worktree.RemoteState("", fence))
    tree = await worktree.prepare(
        run.folder,
        clone_url=url,
        token=clone_token,
        branch=branch,
        fence=fence,
        base_env=base_env,
    )
    run.claim = worktree.Claim(url, branch, tree.remote)  # its pushes move the claim
    return tree


async def unpushable(run: Run, tree: worktree.Worktree) -> str:
    """Why the branch may not be pushed (too large, or a known secret in it), or "": the
    size first, measured by git, so nothing large is ever read here."""
    too_large = push_limit.refusal(await push_limit.measure(tree), run.ctx.policy.push)
    if too_large is not None:
        log.warning("lifecycle: task %s: %s", run.task.id, too_large)
        await asyncio.to_thread(keep_log, run, "blocked", f"[worker] {too_large}")
        return run.public(too_large, MAX_REFUSAL)
    return SECRET_FOUND if await _holds_secret(run, tree) else ""


async def _holds_secret(run: Run, tree: worktree.Worktree) -> bool:
    redactor = run.ctx.redactor
    if not await push_scan.history_holds(
        tree, redactor.contains_secret, overlap=redactor.longest_value
    ):
        return False
    files = await push_scan.files_with(tree, run.ctx.redactor.contains_secret)
    where = ", ".join(files) or "commit metadata"
    detail = f"[worker] not pushed: a known secret value is in the branch ({where})"
    log.warning("lifecycle: task %s: %s", run.task.id, detail)
    await asyncio.to_thread(keep_log, run, "blocked", detail)
    return True


async def push(run: Run, tree: worktree.Worktree) -> None:
    """Push the branch (the caller checked it for secrets), if the run still holds its
    lease: checked right before the push, and the push itself lands only while this run's
    claim on the branch stands (a run that took over since has replaced it)."""
    token = await repo_token(run, "write")
    await run.check_lease()
    try:
        await worktree.push(tree, token=token, who=who(run))
    except worktree.WorktreeError:
        await run.check_lease()  # refused because another run claimed the branch: lease lost
        raise
    await run.ctx.db.run(
        tasks.touch, run.task.id, run.ctx.clock, fence=run.fence, pushed_at=run.ctx.clock()
    )


async def let_go(run: Run) -> None:
    """Remove the run's claim on its branch, if it holds one: when it concluded, and when
    it ends any other way (failed, stopped, its lease lost), so a task that is never run
    again leaves no fence ref behind. Best-effort: a claim left is one small ref, and the
    task's next run forces its own over it."""
    claim, run.claim = run.claim, None
    if claim is None:
        return
    try:
        await worktree.release(
            run.folder,
            claim,
            token=await repo_token(run, "write"),
            base_env=run.ctx.environment.variables,
        )
    except Exception as exc:  # tidying up never fails a run whose outcome is settled
        reason = str(exc) if isinstance(exc, worktree.WorktreeError | GitHubError) else ""
        log.info(
            "lifecycle: task %s: its branch's claim stays (%s)",
            run.task.id,
            reason or type(exc).__name__,
        )


async def repo_token(run: Run, level: str) -> str:
    """A token for this task's repository only, with `contents` at `level` (and metadata)."""
    token = await run.github.scoped_token(run.task.repo, {"contents": level})
    run.ctx.redactor.add(token)
    return token


def who(run: Run) -> str:
    """This run, as its fence commits name it."""
    return f"task {run.task.id} attempt {run.task.attempts} run {run.holder.id}"
