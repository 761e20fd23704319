"""What CI does to a commit in the world: check runs (with annotations) in check suites,
commit statuses and the combined status, Actions workflow runs and jobs with their logs;
and the webhooks GitHub sends as each completes. No HTTP here (as `operations`).

Check runs are written through REST by a GitHub App (a person's token is refused, as on
GitHub). Statuses and workflow runs have no REST write among the described operations:
the sandbox's CI control route and the pull request page make them (`ci_control_routes`).
A suite completes when its last run does, with the worst conclusion of its runs; a run
of a completed suite concluded again with another word concludes the suite again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from github_sandbox import ci_shapes, git
from github_sandbox.operations import (
    HookEvent,
    Operations,
    Outcome,
    SandboxError,
    not_found,
    validation_failed,
)
from github_sandbox.review_ops import Reviews
from github_sandbox.state import (
    Annotation,
    AppInfo,
    CheckRun,
    CheckSuite,
    CommitStatus,
    Job,
    Pull,
    Repo,
    User,
    WorkflowRun,
)

CONCLUSIONS = (
    "action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale",
    "timed_out",
)  # fmt: skip
# Worst first: a suite concludes with the worst conclusion among its runs.
SEVERITY = ("action_required", "timed_out", "cancelled", "failure", "stale", "neutral",
            "skipped", "success")  # fmt: skip
_SHA = re.compile(r"[0-9a-f]{40}")
RUN_STATUSES = ("queued", "in_progress", "completed")
STATUS_STATES = ("error", "failure", "pending", "success")
LEVELS = ("notice", "warning", "failure")
MAX_ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit on one create or update
ACTIONS_APP = AppInfo(
    id=15368,
    slug="github-actions",
    name="GitHub Actions",
    owner=User(9919, "github", "Organization"),
    bot=User(41898282, "github-actions[bot]", "Bot"),
    public_key_pem="",
    created_at=1533600000.0,
    events=(),
    permissions={"actions": "write", "checks": "write", "contents": "write", "metadata": "read"},
)


@dataclass(frozen=True)
class FailingJob:
    """What the CI control route asks for: a job of a workflow run that fails."""

    name: str
    log: str
    annotations: list[Annotation]
    summary: str


class Checks:
    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self.world = ops.world
        self.shapes = ops.shapes
        self.reviews = Reviews(ops)

    # -- helpers ---------------------------------------------------------------------------

    def commit(self, repo: Repo, ref: str) -> str:
        sha = None if repo.git_path is None else git.resolve_commit(repo.git_path, ref)
        if sha is None:
            raise SandboxError(422, f"No commit found for SHA: {ref}")
        return sha

    def pulls_at(self, repo: Repo, sha: str) -> list[Pull]:
        """Open pull requests whose head is `sha` (what check runs and suites list)."""
        return [
            pull
            for pull in repo.pulls.values()
            if repo.issues[pull.number].state == "open" and self.reviews.head_sha(repo, pull) == sha
        ]

    def _branch(self, repo: Repo, sha: str) -> str | None:
        pulls = self.pulls_at(repo, sha)
        if pulls:
            return pulls[0].head_ref
        names = [] if repo.git_path is None else git.branches_containing(repo.git_path, sha)
        return names[0] if names else None

    def _app_info(self, by_actions: bool) -> AppInfo:
        return ACTIONS_APP if by_actions else self.world.app

    def _app(self, by_actions: bool) -> dict[str, Any]:
        return self.shapes.app(self._app_info(by_actions))

    def _sender(self, by_actions: bool) -> User:
        return ACTIONS_APP.bot if by_actions else self.world.app.bot

    def _suite(self, repo: Repo, sha: str, by_actions: bool) -> CheckSuite:
        for suite in repo.check_suites.values():
            if suite.head_sha == sha and suite.by_actions == by_actions:
                return suite
        now = self.world.now()
        suite = CheckSuite(self.world.next_id(), sha, self._branch(repo, sha), now, now, by_actions)
        repo.check_suites[suite.id] = suite
        return suite

    def check_run(self, repo: Repo, check_run_id: int) -> CheckRun:
        found = repo.check_runs.get(check_run_id)
        if found is None:
            raise not_found()
        return found

    def shaped_run(self, repo: Repo, run: CheckRun, *, whole_suite: bool = False) -> dict[str, Any]:
        suite = None
        if whole_suite:
            suite = self._shaped_suite(repo, repo.check_suites[run.suite_id], with_commit=False)
        return ci_shapes.check_run(
            self.shapes,
            repo,
            run,
            app=self._app(run.by_actions),
            pulls=self.pulls_at(repo, run.head_sha),
            suite=suite,
        )

    def _shaped_suite(self, repo: Repo, suite: CheckSuite, *, with_commit: bool) -> dict[str, Any]:
        runs = [r for r in repo.check_runs.values() if r.suite_id == suite.id]
        commit = None
        if with_commit and repo.git_path is not None:
            commit = git.commit_info(repo.git_path, suite.head_sha)
        return ci_shapes.check_suite(
            self.shapes,
            repo,
            suite,
            app=self._app(suite.by_actions),
            pulls=self.pulls_at(repo, suite.head_sha),
            runs=len(runs),
            commit=commit,
        )

    def _run_hook(self, repo: Repo, run: CheckRun, action: str) -> HookEvent:
        shaped = self.shaped_run(repo, run, whole_suite=True)
        return self.ops.hook(
            repo, "check_run", self._sender(run.by_actions), action=action, check_run=shaped
        )

    def _settle_suite(self, repo: Repo, suite: CheckSuite) -> list[HookEvent]:
        """Complete the suite when its last run completes (`check_suite.completed`); a run
        added to it reopens it first (`create_check_run`, `fail_workflow`)."""
        runs = [r for r in repo.check_runs.values() if r.suite_id == suite.id]
        if any(r.status != "completed" for r in runs):
            return []
        conclusion = min(
            (r.conclusion or "success" for r in runs), key=SEVERITY.index, default="success"
        )
        if suite.status == "completed" and suite.conclusion == conclusion:
            return []
        # Completed now, or completed before and one of its runs concluded again with
        # another word: GitHub recomputes the suite's conclusion and sends the event again.
        suite.status, suite.conclusion = "completed", conclusion
        suite.updated_at = self.world.now()
        shaped = self._shaped_suite(repo, suite, with_commit=True)
        sender = self._sender(suite.by_actions)
        return [self.ops.hook(repo, "check_suite", sender, action="completed", check_suite=shaped)]

    def request_suites(self, repo: Repo, heads: list[str]) -> list[HookEvent]:
        """After a push: the App's check suite for each pushed head commit, and its
        `check_suite.requested`, which GitHub sends to an App with `checks: write` (GitHub
        docs, "check_suite" webhook: "new code is pushed to the app's repository")."""
        if self.world.app.permissions.get("checks") != "write":
            return []
        hooks = []
        for sha in dict.fromkeys(heads):
            if any(s.head_sha == sha and not s.by_actions for s in repo.check_suites.values()):
                continue  # the commit has the App's suite already (pushed to another branch)
            suite = self._suite(repo, sha, by_actions=False)
            shaped = self._shaped_suite(repo, suite, with_commit=True)
            sender = self._sender(by_actions=False)
            hooks.append(
                self.ops.hook(repo, "check_suite", sender, action="requested", check_suite=shaped)
            )
        return hooks

    # -- check runs ------------------------------------------------------------------------

    def create_check_run(self, repo: Repo, caller_kind: str, data: Any) -> Outcome:
        if caller_kind != "installation":
            raise SandboxError(403, "You must authenticate via a GitHub App.")
        if not isinstance(data, dict):
            raise SandboxError(400, "Problems parsing JSON")
        name, head_sha = data.get("name"), data.get("head_sha")
        if not isinstance(name, str) or not name:
            raise validation_failed("name", "missing_field", resource="CheckRun")
        if not isinstance(head_sha, str) or not head_sha:
            raise validation_failed("head_sha", "missing_field", resource="CheckRun")
        # "The SHA of the commit" (GitHub's description): a branch name or any other ref
        # GitHub does not resolve here, so neither does the sandbox.
        if not _SHA.fullmatch(head_sha):
            raise SandboxError(422, f"No commit found for SHA: {head_sha}")
        sha = self.commit(repo, head_sha)
        suite = self._suite(repo, sha, by_actions=False)
        suite.status, suite.conclusion = "in_progress", None  # a new run reopens the suite
        run = CheckRun(self.world.next_id(), name, sha, suite.id, self.world.now())
        self._apply(run, data)
        repo.check_runs[run.id] = run
        hooks = [self._run_hook(repo, run, "created")]
        if run.status == "completed":
            hooks.append(self._run_hook(repo, run, "completed"))
        hooks += self._settle_suite(repo, suite)
        return Outcome(self.shaped_run(repo, run), 201, hooks)

    def update_check_run(
        self, repo: Repo, caller_kind: str, check_run_id: int, data: Any
    ) -> Outcome:
        run = self.check_run(repo, check_run_id)
        if caller_kind != "installation" or run.by_actions:
            # Only the App that made a check run may change it.
            raise SandboxError(403, "Resource not accessible by integration")
        if not isinstance(data, dict):
            raise SandboxError(400, "Problems parsing JSON")
        was_completed, concluded = run.status == "completed", run.conclusion
        self._apply(run, data)
        hooks = []
        # A completed run may be concluded again (a re-run's verdict, a person's override):
        # it completes again, and its suite's conclusion follows.
        if run.status == "completed" and (not was_completed or run.conclusion != concluded):
            hooks.append(self._run_hook(repo, run, "completed"))
            hooks += self._settle_suite(repo, repo.check_suites[run.suite_id])
        return Outcome(self.shaped_run(repo, run), 200, hooks)

    def _apply(self, run: CheckRun, data: dict[str, Any]) -> None:
        """The fields of a create or update; checked whole before any is set."""
        for key in ("name", "details_url", "external_id"):
            if key in data and not isinstance(data[key], str):
                raise validation_failed(key, resource="CheckRun")
        status = data.get("status")
        conclusion = data.get("conclusion")
        if status is not None and status not in RUN_STATUSES:
            raise validation_failed("status", resource="CheckRun")
        if conclusion is not None and conclusion not in CONCLUSIONS:
            raise validation_failed("conclusion", resource="CheckRun")
        if conclusion is None and (status == "completed" or "completed_at" in data):
            raise validation_failed("conclusion", "missing_field", resource="CheckRun")
        output = data.get("output")
        annotations = self._annotations(output)
        if output is not None and (
            not isinstance(output.get("summary"), str) or not isinstance(output.get("title"), str)
        ):
            raise validation_failed("output", "missing_field", resource="CheckRun")
        for key in ("name", "details_url", "external_id"):
            if key in data:
                setattr(run, key, data[key])
        if status is not None:
            run.status = status
        if conclusion is not None:
            run.status, run.conclusion = "completed", conclusion
            run.completed_at = self.world.now()
        if output is not None:
            run.title, run.summary = output["title"], output["summary"]
            run.text = output.get("text") if isinstance(output.get("text"), str) else run.text
            run.annotations += annotations  # GitHub adds a request's annotations to the run's

    def _annotations(self, output: Any) -> list[Annotation]:
        if output is None:
            return []
        if not isinstance(output, dict):
            raise validation_failed("output", resource="CheckRun")
        raw = output.get("annotations", [])
        if not isinstance(raw, list) or len(raw) > MAX_ANNOTATIONS_PER_REQUEST:
            raise validation_failed("annotations", resource="CheckRun")
        found = []
        for item in raw:
            if not isinstance(item, dict):
                raise validation_failed("annotations", resource="CheckRun")
            path, message = item.get("path"), item.get("message")
            start, end = item.get("start_line"), item.get("end_line")
            level = item.get("annotation_level")
            if not (isinstance(path, str) and isinstance(message, str) and level in LEVELS):
                raise validation_failed("annotations", "missing_field", resource="CheckRun")
            if not (isinstance(start, int) and isinstance(end, int) and 0 < start <= end):
                raise validation_failed("annotations", resource="CheckRun")
            title, details = item.get("title"), item.get("raw_details")
            found.append(
                Annotation(
                    path,
                    start,
                    end,
                    level,
                    message,
                    title if isinstance(title, str) else None,
                    details if isinstance(details, str) else None,
                )
            )
        return found

    def list_annotations(self, repo: Repo, check_run_id: int) -> list[dict[str, Any]]:
        run = self.check_run(repo, check_run_id)
        return [ci_shapes.annotation(self.shapes, repo, run.head_sha, a) for a in run.annotations]

    def list_for_ref(self, repo: Repo, ref: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """Runs on the commit `ref` names, newest first; `filter=latest` (the default)
        keeps the newest run of each name."""
        sha = self.commit(repo, ref)
        runs = sorted(
            (r for r in repo.check_runs.values() if r.head_sha == sha),
            key=lambda r: r.id,
            reverse=True,
        )
        if "check_name" in query:
            runs = [r for r in runs if r.name == query["check_name"]]
        if "status" in query:
            runs = [r for r in runs if r.status == query["status"]]
        if "app_id" in query:
            runs = [r for r in runs if str(self._app_info(r.by_actions).id) == query["app_id"]]
        if query.get("filter", "latest") == "latest":
            newest: dict[str, CheckRun] = {}
            for item in runs:
                newest.setdefault(item.name, item)
            runs = list(newest.values())
        return [self.shaped_run(repo, r) for r in runs]

    # -- commit statuses -------------------------------------------------------------------

    def latest_statuses(self, repo: Repo, sha: str) -> list[CommitStatus]:
        """The newest status of each context on `sha`, newest first."""
        latest: dict[str, CommitStatus] = {}
        for item in repo.statuses:
            if item.sha == sha:
                latest[item.context] = item
        return sorted(latest.values(), key=lambda s: s.id, reverse=True)

    def combined_status(self, repo: Repo, ref: str) -> dict[str, Any]:
        sha = None if repo.git_path is None else git.resolve_commit(repo.git_path, ref)
        if sha is None:
            raise not_found()
        return ci_shapes.combined_status(self.shapes, repo, sha, self.latest_statuses(repo, sha))

    def add_status(
        self,
        repo: Repo,
        creator: User,
        sha: str,
        *,
        state: str,
        context: str,
        description: str | None = None,
        target_url: str | None = None,
    ) -> Outcome:
        if state not in STATUS_STATES:
            raise validation_failed("state", resource="Status")
        if not context:
            raise validation_failed("context", "missing_field", resource="Status")
        commit = None if repo.git_path is None else git.commit_info(repo.git_path, sha)
        if commit is None:
            raise SandboxError(422, f"No commit found for SHA: {sha}")
        now = self.world.now()
        item = CommitStatus(
            self.world.next_id(), commit.sha, state, context, creator, now, now,
            description, target_url,
        )  # fmt: skip
        repo.statuses.append(item)
        branches = (
            [] if repo.git_path is None else git.branches_containing(repo.git_path, commit.sha)
        )
        fields = ci_shapes.status_event(self.shapes, repo, item, commit, branches)
        hook = self.ops.hook(repo, "status", creator, **fields)
        return Outcome(ci_shapes.simple_status(self.shapes, repo, item), 201, [hook])

    # -- Actions ---------------------------------------------------------------------------

    def workflow_run(self, repo: Repo, run_id: int) -> WorkflowRun:
        found = repo.workflow_runs.get(run_id)
        if found is None:
            raise not_found()
        return found

    def shaped_workflow_run(self, repo: Repo, run: WorkflowRun) -> dict[str, Any]:
        commit = None if repo.git_path is None else git.commit_info(repo.git_path, run.head_sha)
        pulls = self.pulls_at(repo, run.head_sha)
        return ci_shapes.workflow_run(self.shapes, repo, run, pulls=pulls, commit=commit)

    def list_jobs(self, repo: Repo, run_id: int, query: dict[str, str]) -> list[dict[str, Any]]:
        """`filter=latest` (the default): the jobs of the run's most recent execution;
        `all`: every attempt's, oldest first (GitHub's description of the parameter)."""
        run = self.workflow_run(repo, run_id)
        if query.get("filter", "latest") == "all":
            jobs = [repo.jobs[j] for j in run.job_ids]
        else:
            jobs = self.current_jobs(repo, run)
        return [ci_shapes.job(self.shapes, repo, item, run) for item in jobs]

    def job(self, repo: Repo, job_id: int) -> Job:
        found = repo.jobs.get(job_id)
        if found is None:
            raise not_found()
        return found

    def fail_workflow(
        self, repo: Repo, actor: User, ref: str, workflow_name: str, jobs: list[FailingJob]
    ) -> tuple[WorkflowRun, list[HookEvent]]:
        """A finished Actions run on `ref` whose jobs failed: each job's check run (with its
        annotations) and log, the suite, the run, and the webhooks GitHub sends on the way
        (`start_workflow`, then `finish_workflow`)."""
        run, hooks = self.start_workflow(repo, actor, ref, workflow_name, [j.name for j in jobs])
        return run, hooks + self.finish_workflow(repo, run, jobs)

    def start_workflow(
        self, repo: Repo, actor: User, ref: str, workflow_name: str, job_names: list[str]
    ) -> tuple[WorkflowRun, list[HookEvent]]:
        """An Actions run on `ref` with its jobs running, and GitHub's webhooks in order:
        `workflow_run.requested`; per job `workflow_job.queued` and its check run's
        `check_run.created`; then each job's `workflow_job.in_progress` and the run's
        `workflow_run.in_progress`. (`check_suite.requested` goes to the App whose suite it
        is, GitHub Actions, not to this App: GitHub docs, "check_suite" webhook.)"""
        sha = self.commit(repo, ref)
        suite = self._suite(repo, sha, by_actions=True)
        suite.status, suite.conclusion = "in_progress", None  # a new run reopens the suite
        now = self.world.now()
        number = 1 + sum(1 for r in repo.workflow_runs.values() if r.name == workflow_name)
        slug = "".join(c if c.isalnum() else "-" for c in workflow_name.lower()).strip("-") or "ci"
        run = WorkflowRun(
            id=self.world.next_id(), name=workflow_name, path=f".github/workflows/{slug}.yml",
            workflow_id=self.world.next_id(), run_number=number, head_sha=sha,
            head_branch=self._branch(repo, sha), suite_id=suite.id, actor=actor,
            created_at=now, updated_at=now, status="queued",
        )  # fmt: skip
        repo.workflow_runs[run.id] = run
        return run, self._run_jobs(repo, run, job_names)

    def rerun_workflow(self, repo: Repo, run: WorkflowRun, job_names: list[str]) -> list[HookEvent]:
        """A finished run executed again (GitHub's "Re-run jobs"): its next attempt, with
        new jobs and check runs in the same suite; the older attempts' jobs stay listed
        under `filter=all`. The same webhooks as `start_workflow`, for the new attempt."""
        if run.status != "completed":
            raise SandboxError(409, "The workflow run is still running")
        suite = repo.check_suites[run.suite_id]
        suite.status, suite.conclusion = "in_progress", None
        run.run_attempt += 1
        run.status, run.conclusion, run.updated_at = "queued", None, self.world.now()
        return self._run_jobs(repo, run, job_names)

    def _run_jobs(self, repo: Repo, run: WorkflowRun, job_names: list[str]) -> list[HookEvent]:
        """The run's current attempt requested, its jobs queued (each with its check run),
        then all of them in progress: GitHub's webhooks in that order."""
        now = self.world.now()
        hooks = [self._workflow_run_hook(repo, run, "requested")]
        started = []
        for name in job_names:
            check = CheckRun(  # queued, as GitHub Actions makes it
                self.world.next_id(), name, run.head_sha, run.suite_id, now, by_actions=True
            )
            repo.check_runs[check.id] = check
            item = Job(
                id=check.id, run_id=run.id, name=name, head_sha=run.head_sha,
                head_branch=run.head_branch, check_run_id=check.id, created_at=now,
                status="queued", run_attempt=run.run_attempt,
            )  # fmt: skip
            repo.jobs[item.id] = item
            run.job_ids.append(item.id)
            started.append(item)
            hooks.append(self._job_hook(repo, item, run, "queued"))
            hooks.append(self._run_hook(repo, check, "created"))
        run.status = "in_progress"
        for item in started:
            item.status, item.started_at = "in_progress", now
            repo.check_runs[item.check_run_id].status = "in_progress"
            hooks.append(self._job_hook(repo, item, run, "in_progress"))
        hooks.append(self._workflow_run_hook(repo, run, "in_progress"))
        return hooks

    def current_jobs(self, repo: Repo, run: WorkflowRun) -> list[Job]:
        """The jobs of the run's latest attempt, in order."""
        jobs = [repo.jobs[j] for j in run.job_ids]
        return [job for job in jobs if job.run_attempt == run.run_attempt]

    def finish_workflow(
        self, repo: Repo, run: WorkflowRun, jobs: list[FailingJob]
    ) -> list[HookEvent]:
        """The jobs of a started run fail (in `start_workflow`'s order, one spec each): each
        job's and check run's `completed`, the suite's, then the run's."""
        now = self.world.now()
        hooks: list[HookEvent] = []
        for item, spec in zip(self.current_jobs(repo, run), jobs, strict=True):
            item.status, item.conclusion, item.completed_at = "completed", "failure", now
            item.log = spec.log
            check = repo.check_runs[item.check_run_id]
            check.status, check.conclusion, check.completed_at = "completed", "failure", now
            check.title, check.summary = f"{spec.name} failed", spec.summary
            check.annotations = list(spec.annotations)
            hooks.append(self._job_hook(repo, item, run, "completed"))
            hooks.append(self._run_hook(repo, check, "completed"))
        hooks += self._settle_suite(repo, repo.check_suites[run.suite_id])
        run.status, run.conclusion, run.updated_at = "completed", "failure", now
        hooks.append(self._workflow_run_hook(repo, run, "completed"))
        return hooks

    def _job_hook(self, repo: Repo, item: Job, run: WorkflowRun, action: str) -> HookEvent:
        shaped = ci_shapes.job(self.shapes, repo, item, run)
        return self.ops.hook(repo, "workflow_job", run.actor, action=action, workflow_job=shaped)

    def _workflow_run_hook(self, repo: Repo, run: WorkflowRun, action: str) -> HookEvent:
        return self.ops.hook(
            repo,
            "workflow_run",
            run.actor,
            action=action,
            workflow=ci_shapes.workflow(self.shapes, repo, run),
            workflow_run=self.shaped_workflow_run(repo, run),
        )
