"""A Steelframe pull request that conflicts with its moved base: an update run on the
branch, or a person asked.

A base branch moves when something is pushed to it (a `push` webhook) or a pull request
is merged into it (`pull_request.closed`, merged); the reconciler's pass reads every
delivered task's pull request too, for a delivery that never came. Each reads the task's
pull request's mergeability (GitHub computes it lazily: `mergeable` is null until its
background job has answered, so it is read again with a bounded backoff; still unknown,
`MergeStateUnknown` makes the webhook processor retry the delivery later). Only a task
that is `delivered` with an open pull request the App opened from the task's branch in the
same repository is looked at, and only `mergeable_state == "dirty"` (a conflict) acts.

Then, once per (task, base commit, head commit): an update run starts (the task goes
`running`, the run is enqueued under a job id made of the task and the two commits) or,
past the bound (STEELFRAME_BASE_UPDATE_RUNS), the task goes `waiting_for_info` with one
comment on the pull request. The bound counts the update runs of a chain: a conflict on a
merge commit an update run pushed continues its chain; any other head starts a new one.

Idempotent: the pair's row is the claim (unique per task, base and head), written in one
transaction with the task's change; every other delivery (a redelivery, the reconciler,
another push that left the same pair) finds it and changes nothing. A stop's comment
GitHub refused is posted by the reconciler's pass (`comment_stop`): the task then waits
for a person, and no base move reads a task that is not delivered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar, cast

from sqlalchemy.exc import IntegrityError

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.github.issue_records import PullRequest
from bot.github.records import MergeState
from bot.lifecycle import base_store, tasks
from bot.lifecycle.base_comment import post_stop, shown_ref
from bot.lifecycle.base_models import BaseUpdate, UpdateVerdict
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import Task
from bot.lifecycle.queue import LifecycleQueue, enqueue_committed
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition
from bot.lifecycle.transition import publish

log = logging.getLogger(__name__)
T = TypeVar("T")
# Seconds between reads of a mergeability GitHub has not computed yet (its background job
# usually answers within seconds); then the delivery is retried later.
DEFAULT_BACKOFF = (1.0, 2.0, 4.0)
# Pull requests a base move reads at once (each read is a GitHub request, and may wait).
MAX_READS_AT_ONCE = 8
# Delivered tasks the reconciler's pass reads (it runs every lease period, a minute by
# default: 20 a minute stays far below an installation's 5,000 requests an hour); the
# window moves on with each pass, so every task is read in turn.
RECONCILE_WINDOW = 20
CONFLICT = "dirty"  # GitHub's mergeable_state of a pull request whose test merge conflicts


class BaseGitHub(GitHubApi, Protocol):
    async def get_pull(self, repo: str, number: int) -> PullRequest: ...

    async def merge_state(self, repo: str, number: int) -> MergeState: ...

    async def list_pulls(
        self, repo: str, *, head: str | None = None, state: str = "open", base: str | None = None
    ) -> list[PullRequest]: ...


class MergeStateUnknown(Exception):
    """GitHub has not computed the pull request's mergeability yet: the webhook processor
    retries the delivery with backoff (the reconciler's pass reads it again too)."""


@dataclass(frozen=True)
class UpdateOutcome:
    verdict: str  # "update run" | "needs human" | "ignored" | "already handled"
    reason: str
    task_id: int | None = None


def update_job_id(task: Task, base_sha: str, head_sha: str) -> str:
    return f"task-{task.id}-g{task.generation}-base-{base_sha[:12]}-{head_sha[:12]}"


def needs_human_question(pr_number: int, base_ref: str, reason: str) -> str:
    return (
        f"Pull request #{pr_number} has merge conflicts with `{base_ref}` and needs a person: "
        f"{reason}. The pull request says so too. A Decision starts one more update run, "
        "with the Decision as its guidance."
    )


class BaseUpdates:
    def __init__(
        self,
        *,
        db: Database,
        github: BaseGitHub | None,
        queue: LifecycleQueue | None,
        update_runs: int,
        clock: Clock = utcnow,
        backoff: tuple[float, ...] = DEFAULT_BACKOFF,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.db = db
        self.github = github
        self.queue = queue
        self.update_runs = update_runs
        self.clock = clock
        self.backoff = backoff
        self.sleep = sleep

    async def on_base_moved(self, repo: str, base_ref: str) -> list[UpdateOutcome]:
        """Branch `base_ref` of `repo` moved: each delivered task's pull request into it is
        read, and a conflicting one handled. Every task is tried; the first unknown
        mergeability is raised after the others were (the delivery is retried)."""
        found = await self._into(repo, base_ref)
        # Read side by side: each read may wait out GitHub's backoff, and one wait per
        # delivery is enough, not one per task.
        limit = asyncio.Semaphore(MAX_READS_AT_ONCE)

        async def read(task: Task) -> UpdateOutcome | MergeStateUnknown:
            async with limit:
                try:
                    return await self.check(task, base_ref=base_ref)
                except MergeStateUnknown as exc:
                    return exc

        read_all = await asyncio.gather(*(read(task) for task in found))
        unknown = [r for r in read_all if isinstance(r, MergeStateUnknown)]
        if unknown:
            raise unknown[0]
        return [r for r in read_all if isinstance(r, UpdateOutcome)]

    async def _into(self, repo: str, base_ref: str) -> list[Task]:
        """The delivered tasks whose pull request is open into `base_ref`, found with one
        listing: a push to any other branch (each run's push to its own branch is one)
        reads none of them."""
        delivered = await self.db.run(base_store.delivered_with_pulls, repo)
        if not delivered or self.github is None:
            return delivered
        into = {pull.number for pull in await self.github.list_pulls(repo, base=base_ref)}
        return [task for task in delivered if task.pr_number in into]

    async def check(self, task: Task, *, base_ref: str | None = None) -> UpdateOutcome:
        outcome = await self._handle(task, base_ref)
        log.info(
            "lifecycle: task %s: base of pull request #%s: %s (%s)",
            task.id,
            task.pr_number,
            outcome.verdict,
            outcome.reason,
        )
        return outcome

    async def _handle(self, task: Task, base_ref: str | None) -> UpdateOutcome:
        github = self.github
        if github is None or not task.pr_number:
            return UpdateOutcome("ignored", "no pull request to read", task.id)
        state = await self._settled(github, task)
        if state.state != "open":
            return UpdateOutcome("ignored", "the pull request is not open", task.id)
        if base_ref is not None and state.base.ref != base_ref:
            return UpdateOutcome("ignored", f"its base is {state.base.ref}", task.id)
        if state.mergeable_state != CONFLICT:
            return UpdateOutcome("ignored", f"mergeable_state {state.mergeable_state}", task.id)
        done = await self.db.run(base_store.row_at, task.id, state.base.sha, state.head.sha)
        if done is not None:
            await self._comment(github, task, done)
            return UpdateOutcome("already handled", f"the pair is {done.verdict}", task.id)
        refused = await self._not_ours(github, task)
        if refused:
            return UpdateOutcome("ignored", refused, task.id)
        return await self._claim(
            github, task, self._decide(task, state, await self._used(task, state))
        )

    async def _settled(self, github: BaseGitHub, task: Task) -> MergeState:
        """The pull request's merge state once GitHub has computed it (`mergeable` not
        null), read again after each wait of the backoff; MergeStateUnknown after the last."""
        number = int(task.pr_number or 0)
        state = await github.merge_state(task.repo, number)
        for wait in self.backoff:
            if state.mergeable is not None or state.state != "open":
                return state
            await self.sleep(wait)
            state = await github.merge_state(task.repo, number)
        if state.mergeable is None and state.state == "open":
            raise MergeStateUnknown(f"{task.repo}#{number}: GitHub has not computed it yet")
        return state

    async def _not_ours(self, github: BaseGitHub, task: Task) -> str:
        pull = await github.get_pull(task.repo, int(task.pr_number or 0))
        if pull.head.repo is None or pull.head.repo.full_name != task.repo:
            return "the pull request's branch is in another repository"
        if pull.head.ref != (task.branch or tasks.branch_name(task.issue)):
            return "the pull request's branch is not the task's"
        if not await github.is_app_login(pull.author):
            return f"the pull request was opened by {pull.author or 'unknown'}, not the App"
        return ""

    async def _used(self, task: Task, state: MergeState) -> tuple[str, int]:
        """The chain the conflicting head belongs to and the update runs it has used."""
        parent = await self.db.run(base_store.made_by_update, task.id, state.head.sha)
        return (parent.chain_sha, parent.run_number) if parent else (state.head.sha, 0)

    def _decide(self, task: Task, state: MergeState, chain: tuple[str, int]) -> base_store.Claim:
        chain_sha, used = chain
        run = used < self.update_runs
        base = state.base
        shown = shown_ref(base.ref)  # the reason and the note are public text
        if run:
            reason = f"it conflicts with {shown} at {base.sha[:12]}"
            note = (
                f"The pull request conflicts with `{shown}`: update run {used + 1} of "
                f"{self.update_runs} merges it into the branch."
            )
        else:
            reason = (
                f"it conflicts with {shown} at {base.sha[:12]} after {used} update run(s), "
                f"the limit (STEELFRAME_BASE_UPDATE_RUNS={self.update_runs})"
            )
            note = f"The pull request conflicts with `{shown}`: a person is needed."
        return base_store.Claim(
            task_id=task.id,
            generation=task.generation,
            pr_number=int(task.pr_number or 0),
            base_ref=base.ref,
            base_sha=base.sha,
            head_sha=state.head.sha,
            chain_sha=chain_sha,
            run_number=used + 1 if run else used,
            verdict=UpdateVerdict.UPDATE if run else UpdateVerdict.NEEDS_HUMAN,
            reason=reason,
            job_id=update_job_id(task, base.sha, state.head.sha) if run else None,
            note=note,
        )

    async def _claim(
        self, github: BaseGitHub, task: Task, claim: base_store.Claim
    ) -> UpdateOutcome:
        question = needs_human_question(claim.pr_number, shown_ref(claim.base_ref), claim.reason)
        try:
            change = await self.db.run(base_store.claim_tx, claim, question, self.clock)
        except IntegrityError:
            return UpdateOutcome("already handled", "another delivery claimed the pair", task.id)
        except IllegalTransition as exc:
            return UpdateOutcome("ignored", f"the task became {exc.current}", task.id)
        if claim.verdict is UpdateVerdict.UPDATE:
            await enqueue_committed(self.queue, task.id, str(claim.job_id), "update run")
        else:
            row = await self.db.run(base_store.row_at, task.id, claim.base_sha, claim.head_sha)
            if row is not None:
                await self._comment(github, task, row)
        await publish(self.db, github, change, create_progress=False, clock=self.clock)
        verdict = "update run" if claim.verdict is UpdateVerdict.UPDATE else "needs human"
        return UpdateOutcome(verdict, claim.reason, task.id)

    async def _comment(self, github: BaseGitHub, task: Task, row: BaseUpdate) -> None:
        if row.state in base_store.STOPS:
            await comment_stop(self.db, github, task.repo, row)


async def comment_stop(db: Database, github: GitHubApi, repo: str, row: BaseUpdate) -> None:
    """The stop's comment on the pull request, unless GitHub has it already; its id kept
    (not posted: the reconciler's pass tries again, `reconcile_bases`)."""
    if row.comment_id is not None:
        return
    comment_id = await post_stop(github, repo, row)
    if comment_id is not None:
        await db.run(base_store.commented, row.id, comment_id)


async def reconcile_bases(
    ctx: LifecycleContext, github: GitHubApi, queue: LifecycleQueue
) -> list[UpdateOutcome]:
    """The reconciler's pass: delivered tasks' pull requests read as a base move would read
    them, for a `push` or merge webhook that never came (or whose retries ran out), at most
    `RECONCILE_WINDOW` a pass, in turn. It does not wait for GitHub's mergeability: one not
    computed yet is read when its turn comes again."""
    updates = BaseUpdates(
        db=ctx.db,
        # The App's client: it serves every call the lifecycle makes.
        github=cast(BaseGitHub, github),
        queue=queue,
        update_runs=ctx.settings.base_update_runs,
        clock=ctx.clock,
        backoff=(),
    )
    outcomes = []
    delivered = await ctx.db.run(base_store.delivered_with_pulls)
    turn = int(ctx.clock().timestamp() // max(ctx.policy.lease_seconds, 1.0))
    for task in window(delivered, turn, RECONCILE_WINDOW):
        try:
            outcomes.append(await updates.check(task))
        except MergeStateUnknown:
            continue
        except Exception as exc:  # one pull request unreadable: the others are still read
            log.warning("lifecycle: task %s: base not checked: %s", task.id, exc)
    # Stops whose comment GitHub refused: their tasks wait for a person, which no base
    # move (nor the window above) reads. A lease period old: a younger one's comment is
    # still on its way from the process that wrote the stop.
    settled = ctx.clock() - timedelta(seconds=ctx.policy.lease_seconds)
    for repo, row in await ctx.db.run(base_store.uncommented_stops, RECONCILE_WINDOW, settled):
        try:
            await comment_stop(ctx.db, github, repo, row)
        except Exception as exc:  # the id not kept (a lock wait): posted, found next pass
            log.warning("lifecycle: task %s: stop comment not recorded: %s", row.task_id, exc)
    return outcomes


def window(items: list[T], turn: int, size: int) -> list[T]:
    """The `turn`th window of `size` items, wrapping around: consecutive turns cover every
    item (all of them when there are no more than `size`)."""
    if len(items) <= size:
        return list(items)
    start = (turn * size) % len(items)
    return (items + items)[start : start + size]
