"""Failing CI on a Steelframe pull request: a fix run on the branch, or a person asked.

A CI webhook (webhooks.handlers.ci) reporting a failure on a commit reaches a task only
when the commit is the head of the task's open pull request, which the App opened from the
task's branch in the same repository, and the task is `delivered` (a task waiting for a
person waits; while its run is live or queued the handler raises `CiBusy`, so the webhook
processor retries the delivery after the run). The App's own checks are ignored. Every run
that ends delivered reads its head's CI the same way (`recheck_after_delivery`), which
takes a failure reported while the task waited for a person, when that run pushed nothing.

Then, once per (task, head commit): the failure is read (`ci_evidence`), judged
(`ci_rules`), and either a fix run starts (the task goes `running` with the evidence pinned
in its row, the run is enqueued under a job id made of the task, the head commit and the
fix run's number) or the task goes `waiting_for_info` (`steelframe:needs_human`) with one
summary comment on the pull request (`ci_summary`). The bound (STEELFRAME_CI_FIX_RUNS)
counts the fix runs of a chain: a failure on a commit a fix run pushed continues its
chain; any other head commit (a person's push) starts a new one.

Idempotent: the head commit's row is the claim (unique per task and commit), written in
one transaction with the task's change and the webhook handler's done-record; every other
delivery about the commit (another check, a redelivery under any id) finds it and only
makes sure the summary, if one is due, is on the pull request. Two rows claim nothing
(`ci_models.RECLAIMABLE_STATES`): a fix run the pull request's merge or close interrupted
(`interrupted`), and a fix run that ended without a fix (`ended`: it failed or was
terminated; one that asked a question stays queued, and the Decision's run continues it).
The next failure on that commit while the task is delivered (after the reopen; a re-run
of the checks) takes the row over (compare-and-set on its state, so once): a fix run
again, counting an ended run against the bound, or, past it, a person asked with the
summary.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Protocol, cast

from sqlalchemy.exc import IntegrityError

from bot.clock import Clock, utcnow
from bot.contracts.tasks import FailingCheck
from bot.db import Database
from bot.github.client import AppIdentity
from bot.github.errors import GitHubError
from bot.github.issue_records import PullRequest
from bot.lifecycle import ci_store, tasks
from bot.lifecycle.ci_evidence import (
    CiReads,
    Evidence,
    failing_names,
    read_evidence,
    render,
    scrub,
)
from bot.lifecycle.ci_failures import CiFailure
from bot.lifecycle.ci_models import RECLAIMABLE_STATES, CiFix, CiFixState, CiVerdict
from bot.lifecycle.ci_rules import CiCause, judge
from bot.lifecycle.ci_summary import post_summary, summary_body
from bot.lifecycle.context import LifecycleContext
from bot.lifecycle.models import Task
from bot.lifecycle.public_text import PublicPlace
from bot.lifecycle.queue import LifecycleQueue, enqueue_committed
from bot.lifecycle.redact import Redactor
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import IllegalTransition, TaskState
from bot.lifecycle.transition import publish

log = logging.getLogger(__name__)
# A run of the task is live or coming: a failure on its head waits for it to end.
BUSY = (TaskState.RUNNING, TaskState.QUEUED)
MAX_NOTE = 500  # the progress comment's line about a failure


class CiGitHub(GitHubApi, CiReads, Protocol):
    async def identity(self) -> AppIdentity: ...

    async def get_pull(self, repo: str, number: int) -> PullRequest: ...


class CiBusy(Exception):
    """A failure on the head of a task whose run is live: the webhook processor retries
    the delivery with backoff (minutes), by when the run has ended."""


@dataclass(frozen=True)
class CiOutcome:
    """What a failure report came to: `started`/`stopped` (the claim), or why not."""

    verdict: str  # "fix run" | "needs human" | "ignored" | "already handled"
    reason: str
    task_id: int | None = None


def ci_job_id(task: Task, head_sha: str, run_number: int, *, again: bool = False) -> str:
    """The fix run's job: the same for every delivery about this commit and run. `again`:
    the run the pull request's close interrupted is asked for once more, under a job id of
    its own (its first job may still be kept in a registry)."""
    job = f"task-{task.id}-g{task.generation}-ci-{head_sha[:12]}-{run_number}"
    return f"{job}-{uuid.uuid4().hex[:6]}" if again else job


def needs_human_question(pr_number: int, reason: str) -> str:
    return (
        f"Failing CI on pull request #{pr_number} needs a person: {reason}. The summary is "
        "on the pull request."
    )


class CiIntake:
    def __init__(
        self,
        *,
        db: Database,
        github: CiGitHub | None,
        queue: LifecycleQueue | None,
        fix_runs: int,
        redactor: Redactor,
        github_api_url: str,
        clock: Clock = utcnow,
    ) -> None:
        self.db = db
        self.github = github
        self.queue = queue
        self.fix_runs = fix_runs
        self.redactor = redactor
        self.api_url = github_api_url
        self.clock = clock

    async def on_failure(self, failure: CiFailure) -> CiOutcome:
        outcome = await self._handle(failure)
        log.info(
            "lifecycle: CI %s %r failed on %s@%s: task %s %s: %s",
            failure.event,
            failure.name,
            failure.repo,
            failure.head_sha[:12],
            outcome.task_id,
            outcome.verdict,
            outcome.reason,
        )
        return outcome

    async def _handle(self, failure: CiFailure) -> CiOutcome:
        github = self.github
        if github is None:
            return CiOutcome("ignored", "GitHub is not configured")
        identity = await github.identity()
        if failure.app_id == identity.id or (
            failure.event == "status" and await github.is_app_login(failure.sender)
        ):
            return CiOutcome("ignored", "the App's own check")
        found = await self.db.run(
            ci_store.tasks_on, failure.repo, failure.branches, failure.pull_numbers
        )
        if not found:
            return CiOutcome("ignored", "not a Steelframe pull request's branch")
        task = found[0]
        done = await self.db.run(ci_store.row_at, task.id, failure.head_sha)
        if done is not None and done.state not in RECLAIMABLE_STATES:
            if done.state in ci_store.STOPS:
                # The summary is there (posted now if a crash or GitHub kept it off the
                # first time).
                await self._summary(github, task, done.head_sha)
            return CiOutcome("already handled", f"head commit is {done.verdict}", task.id)
        if task.archived or task.state not in (TaskState.DELIVERED, *BUSY):
            why = "archived" if task.archived else str(task.state)
            return CiOutcome("ignored", f"the task is {why}", task.id)
        pull = await github.get_pull(task.repo, int(task.pr_number or 0))
        not_head = await self._not_head(github, pull, task, failure)
        if not_head:
            return CiOutcome("ignored", not_head, task.id)
        if task.state in BUSY:
            # The head moved while a run is live (its own push, CI faster than its finish,
            # or a person's), or a run is queued (a review's, a retry's) that may push
            # nothing and deliver again: the delivery is retried once the run has ended.
            raise CiBusy(f"task {task.id} is {task.state}; the failure on its head is read later")
        return await self._decide(github, task, failure, pull, done)

    async def recheck(self, task: Task) -> CiOutcome:
        """The head of `task`'s pull request read as a failure report about it would be:
        a run has just delivered the task again, and a failure GitHub reported while no
        failure could be taken (the task waited for a person) is still on the head when
        that run pushed nothing. A head with nothing failing (CI still running, or green)
        is "ignored"; one already handled is left as it was."""
        github = self.github
        if github is None or not task.pr_number:
            return CiOutcome("ignored", "no pull request to read", task.id)
        pull = await github.get_pull(task.repo, int(task.pr_number))
        failure = CiFailure(
            event="delivery",
            repo=task.repo,
            head_sha=pull.head.sha,
            branches=(pull.head.ref,),
            name="",
            conclusion="failure",
            pull_numbers=(int(task.pr_number),),
        )
        return await self._handle(failure)

    async def _not_head(
        self, github: CiGitHub, pull: PullRequest, task: Task, failure: CiFailure
    ) -> str:
        if pull.state != "open":
            return "the pull request is not open"
        if pull.head.sha != failure.head_sha:
            return "not the pull request's head commit"
        if pull.head.repo is None or pull.head.repo.full_name != task.repo:
            return "the pull request's branch is in another repository"
        author = pull.author
        if not await github.is_app_login(author):
            return f"the pull request was opened by {author or 'unknown'}, not the App"
        return ""

    async def _decide(
        self,
        github: CiGitHub,
        task: Task,
        failure: CiFailure,
        pull: PullRequest,
        prior: CiFix | None,
    ) -> CiOutcome:
        """Judge the failure and claim the head commit (`prior`: its row that claims it no
        longer, taken over)."""
        sha = failure.head_sha
        own = (await github.identity()).id
        evidence = await read_evidence(
            github, task.repo, sha, own_app_id=own, redactor=self.redactor
        )
        base = pull.base.ref
        try:
            # The base is read only when something fails here (a head read at delivery is
            # mostly green or not run yet).
            if base and evidence.failed:
                on_base = await failing_names(github, task.repo, base, own)
            else:
                on_base = set()
        except GitHubError:
            on_base = set()
        judgement = judge(evidence, on_base)
        if judgement.cause is CiCause.NOTHING:
            return CiOutcome("ignored", judgement.reason, task.id)
        chain, used = await self._chain(task.id, sha, prior)
        ended = prior is not None and prior.state == CiFixState.ENDED
        checks = self._failing(evidence, failure)
        names = ", ".join(check["name"] for check in checks)
        fix = judgement.cause is CiCause.CHANGE and used < self.fix_runs
        # An ended fix run on this very commit keeps its number when a person is asked:
        # the summary and the CI history still say that it was tried.
        number = used + 1 if fix else (used if ended else 0)
        reason = self._reason(judgement.reason, judgement.cause, used, fix=fix, ended=ended)
        if fix:
            note = f"CI failed ({names}): fix run {number} of {self.fix_runs}."
        else:
            note = f"CI failed ({names}): a person is needed. {reason}."
        again = prior is not None
        claim = ci_store.Claim(
            task_id=task.id,
            generation=task.generation,
            pr_number=int(task.pr_number or 0),
            head_sha=sha,
            chain_sha=chain,
            run_number=number,
            verdict=CiVerdict.FIX if fix else CiVerdict.NEEDS_HUMAN,
            checks=checks,
            # The task's question (the Board, Chat) and the CI history show it as stored.
            reason=self._public(reason, task),
            evidence=render(evidence),
            job_id=ci_job_id(task, sha, number, again=again) if fix else None,
            note=self._public(note, task),
            fix_runs=self.fix_runs,
            taking_over=None if prior is None else CiFixState(prior.state),
        )
        return await self._claim(github, task, claim)

    def _failing(self, evidence: Evidence, failure: CiFailure) -> tuple[FailingCheck, ...]:
        """The failing checks as data (their names with known secrets and token shapes
        masked, as the evidence is; otherwise as CI gave them: clients show them as text),
        or the reported one when none could be read."""
        read = [(check.name, check.conclusion) for check in evidence.failed]
        return tuple(
            FailingCheck(name=scrub(name, self.redactor), conclusion=conclusion)
            for name, conclusion in read or [(failure.name, failure.conclusion)]
        )

    async def _chain(self, task_id: int, sha: str, prior: CiFix | None) -> tuple[str, int]:
        """The chain a failure on `sha` belongs to and the fix runs it has used: an ended fix
        run on `sha` itself used one (it may have failed or asked on every try: counted, a
        commit is never fixed past the bound); else the fix run whose push made `sha`, if
        one did (an interrupted run on `sha` never ran to its end: not counted)."""
        if prior is not None and prior.state == CiFixState.ENDED:
            return prior.chain_sha, prior.run_number
        parent = await self.db.run(ci_store.made_by_fix_run, task_id, sha)
        return (parent.chain_sha, parent.run_number) if parent else (sha, 0)

    def _reason(self, judged: str, cause: CiCause, used: int, *, fix: bool, ended: bool) -> str:
        if ended:
            judged = f"{judged} (fix run {used} on this commit ended without a fix)"
        if fix or cause is not CiCause.CHANGE:
            return judged
        return (
            f"{judged} after {used} fix run(s), the limit (STEELFRAME_CI_FIX_RUNS={self.fix_runs})"
        )

    def _public(self, text: str, task: Task) -> str:
        """The progress comment's line, or the stop's reason (which the task's question and
        the pull request's summary say): check names and reasons are CI's text (a
        workflow's author names its jobs), so redacted, flattened and defanged as
        `ci_summary` makes them: a name can be markdown for an image, a link, a mention or a
        closing keyword. The reason is stored so (the summary publishes it again, which
        keeps it safe), the note is made from the reason as CI gave it."""
        place = PublicPlace.of(task.repo, task.issue, self.api_url)
        return self.redactor.published(text, place, MAX_NOTE)

    async def _claim(self, github: CiGitHub, task: Task, claim: ci_store.Claim) -> CiOutcome:
        question = needs_human_question(claim.pr_number, claim.reason)
        try:
            change = await self.db.run(ci_store.claim_tx, claim, question, self.clock)
        except (IntegrityError, ci_store.AlreadyClaimed):
            return CiOutcome("already handled", "another delivery claimed the commit", task.id)
        except IllegalTransition as exc:
            return CiOutcome("ignored", f"the task became {exc.current}", task.id)
        if claim.verdict is CiVerdict.FIX:
            await enqueue_committed(self.queue, task.id, str(claim.job_id), "fix run")
        else:
            await self._summary(github, task, claim.head_sha)
        await publish(self.db, github, change, create_progress=False, clock=self.clock)
        verdict = "fix run" if claim.verdict is CiVerdict.FIX else "needs human"
        return CiOutcome(verdict, claim.reason, task.id)

    async def _summary(self, github: CiGitHub, task: Task, head_sha: str) -> None:
        await post_ci_summary(
            self.db, github, task, head_sha, redactor=self.redactor, github_api_url=self.api_url
        )


async def post_ci_summary(
    db: Database,
    github: GitHubApi,
    task: Task,
    head_sha: str,
    *,
    redactor: Redactor,
    github_api_url: str,
) -> None:
    """The pull request's summary of where CI handling stopped, for the row at `head_sha`
    (the intake's stop, or a fix run that changed nothing)."""
    stop = await db.run(ci_store.stop_of, task, head_sha)
    if stop is not None:
        body = summary_body(stop, redactor, github_api_url)
        await post_summary(github, task.repo, stop.pr_number, body)


async def recheck_after_delivery(ctx: LifecycleContext, github: GitHubApi, task_id: int) -> None:
    """`CiIntake.recheck` as a run ends delivered (bot.lifecycle.finish). It never fails the
    delivery: CI is also read from its own webhooks."""
    intake = CiIntake(
        db=ctx.db,
        # The App's client: it serves every call the lifecycle makes, CI reads included.
        github=cast(CiGitHub, github),
        queue=LifecycleQueue(ctx.redis, name=ctx.queue_name, time_limit=ctx.policy.time_limit),
        fix_runs=ctx.settings.ci_fix_runs,
        redactor=ctx.redactor,
        github_api_url=ctx.settings.github_api_url,
        clock=ctx.clock,
    )
    try:
        task = await ctx.db.run(tasks.get_task, task_id)
        outcome = await intake.recheck(task)
    except Exception as exc:  # logged, and the delivery stands
        log.warning("lifecycle: task %s: CI on its head not read at delivery: %s", task_id, exc)
        return
    log.info(
        "lifecycle: task %s delivered; CI on its head: %s (%s)",
        task_id,
        outcome.verdict,
        outcome.reason,
    )
