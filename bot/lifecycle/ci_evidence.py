"""What failed on a commit, read from GitHub: the failing check runs with their
annotations, the failing Actions jobs' log tails (the job-log endpoint answers with a 302 to
plain text; the client follows it without the token), and the failing commit statuses.

All of it is text from outside (a CI log prints whatever the code under test printed): it
is redacted here (the worker's known secret values and anything shaped like a token) and
cut to bounds, and a fix run gets it only inside an `<ci-evidence>` block marked as data.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from bot.github.errors import GitHubError
from bot.github.records import Annotation, CheckRun, CombinedStatus, CommitStatus, JobLog
from bot.lifecycle.ci_failures import FAILED_CONCLUSIONS, FAILED_STATES
from bot.lifecycle.redact import Redactor, mask_token_shapes

log = logging.getLogger(__name__)
LOG_TAIL_LINES = 200
LOG_TAIL_BYTES = 16 * 1024
MAX_CHECKS = 5  # failing checks read per commit (their logs are the bulk)
MAX_ANNOTATIONS = 20
MAX_FIELD = 2000  # a summary, a description, an annotation's message
MAX_EVIDENCE = 48 * 1024
# GitHub Actions' App: its check runs are jobs, and a job's id is its check run's id.
ACTIONS_SLUG = "github-actions"


class CiReads(Protocol):
    """The GitHub reads evidence needs (`bot.github.client.GitHubClient` has them)."""

    async def list_check_runs_for_ref(self, repo: str, ref: str) -> list[CheckRun]: ...

    async def list_check_run_annotations(
        self, repo: str, check_run_id: int
    ) -> list[Annotation]: ...

    async def combined_status(self, repo: str, ref: str) -> CombinedStatus: ...

    async def download_job_log(self, repo: str, job_id: int, *, max_bytes: int) -> JobLog: ...


@dataclass(frozen=True)
class FailedCheck:
    """One failing check run or commit status, as a fix run and the rules read it."""

    kind: str  # "check" | "status"
    name: str
    conclusion: str
    by_actions: bool = False
    summary: str = ""
    url: str = ""
    annotations: tuple[str, ...] = ()  # "path:line: message"
    annotated_paths: tuple[str, ...] = ()
    log_tail: str = ""  # the job log's last lines (Actions jobs only)
    log_read: bool = False  # the job log was read (an empty tail then means an empty log)


@dataclass(frozen=True)
class Evidence:
    sha: str
    failed: tuple[FailedCheck, ...] = ()
    notes: tuple[str, ...] = field(default=())  # what could not be read

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(check.name for check in self.failed)


def scrub(text: str, redactor: Redactor) -> str:
    """Known secret values and token-shaped text masked."""
    return mask_token_shapes(redactor.redact(text))


def tail(text: str, *, lines: int = LOG_TAIL_LINES, size: int = LOG_TAIL_BYTES) -> str:
    """The last `lines` lines of `text`, at most `size` bytes of them."""
    kept = "\n".join(text.rstrip("\n").splitlines()[-lines:])
    raw = kept.encode()
    return raw[-size:].decode(errors="ignore") if len(raw) > size else kept


async def read_evidence(
    github: CiReads, repo: str, sha: str, *, own_app_id: int | None, redactor: Redactor
) -> Evidence:
    """Everything failing on `sha` now, except the App's own checks."""
    notes: list[str] = []
    failed: list[FailedCheck] = []
    for run in (await failing_runs(github, repo, sha, own_app_id))[:MAX_CHECKS]:
        failed.append(await _check(github, repo, run, redactor, notes))
    for status in await failing_statuses(github, repo, sha):
        description = scrub(status.description or "", redactor)[:MAX_FIELD]
        url = scrub(status.target_url or "", redactor)[:MAX_FIELD]
        failed.append(FailedCheck("status", status.context, status.state, False, description, url))
    return Evidence(sha, tuple(failed), tuple(notes))


async def failing_runs(
    github: CiReads, repo: str, ref: str, own_app_id: int | None
) -> list[CheckRun]:
    runs = await github.list_check_runs_for_ref(repo, ref)
    return [
        run
        for run in runs
        if run.conclusion in FAILED_CONCLUSIONS
        and (own_app_id is None or run.app is None or run.app.id != own_app_id)
    ]


async def failing_statuses(github: CiReads, repo: str, ref: str) -> list[CommitStatus]:
    combined = await github.combined_status(repo, ref)
    return [status for status in combined.statuses if status.state in FAILED_STATES]


async def failing_names(github: CiReads, repo: str, ref: str, own_app_id: int | None) -> set[str]:
    """The names of the checks and status contexts failing on `ref` (a branch or a sha)."""
    names = {run.name for run in await failing_runs(github, repo, ref, own_app_id)}
    statuses = await github.combined_status(repo, ref)
    return names | {s.context for s in statuses.statuses if s.state in FAILED_STATES}


async def _check(
    github: CiReads, repo: str, run: CheckRun, redactor: Redactor, notes: list[str]
) -> FailedCheck:
    by_actions = run.app is not None and run.app.slug == ACTIONS_SLUG
    lines, paths = await _annotations(github, repo, run, redactor, notes)
    log_tail, log_read = "", False
    if by_actions:
        try:
            job_log = await github.download_job_log(repo, run.id, max_bytes=LOG_TAIL_BYTES)
            log_tail, log_read = scrub(tail(job_log.text), redactor), True
        except GitHubError as exc:
            notes.append(f"the log of {run.name!r} could not be read ({type(exc).__name__})")
    output = run.output
    summary = "\n".join(part for part in (output.title, output.summary, output.text) if part)
    return FailedCheck(
        kind="check",
        name=run.name,
        conclusion=str(run.conclusion),
        by_actions=by_actions,
        summary=scrub(summary, redactor)[:MAX_FIELD],
        url=run.html_url or run.details_url or "",
        annotations=lines,
        annotated_paths=paths,
        log_tail=log_tail,
        log_read=log_read,
    )


async def _annotations(
    github: CiReads, repo: str, run: CheckRun, redactor: Redactor, notes: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if run.output.annotations_count == 0:
        return (), ()
    try:
        found = await github.list_check_run_annotations(repo, run.id)
    except GitHubError as exc:
        notes.append(f"the annotations of {run.name!r} could not be read ({type(exc).__name__})")
        return (), ()
    lines = []
    for item in found[:MAX_ANNOTATIONS]:
        title = f" ({item.title})" if item.title else ""
        message = scrub(f"{item.message or ''}{title}", redactor)[:MAX_FIELD]
        lines.append(f"{item.path}:{item.start_line}: [{item.annotation_level}] {message}")
    return tuple(lines), tuple(dict.fromkeys(item.path for item in found))


def render(evidence: Evidence) -> str:
    """The evidence as a fix run reads it (inside its data block), bounded."""
    parts: list[str] = []
    for check in evidence.failed:
        what = "Commit status" if check.kind == "status" else "Check run"
        by = ", GitHub Actions" if check.by_actions else ""
        parts.append(f'{what} "{check.name}" ({check.conclusion}{by})')
        if check.summary:
            parts.append(f"  summary: {check.summary}")
        if check.url:
            parts.append(f"  details: {check.url}")
        if check.annotations:
            parts.append("  annotations:")
            parts += [f"    {line}" for line in check.annotations]
        if check.log_tail:
            parts.append(f"  job log (last {LOG_TAIL_LINES} lines at most):")
            parts += [f"    {line}" for line in check.log_tail.splitlines()]
        parts.append("")
    parts += [f"(note: {note})" for note in evidence.notes]
    text = "\n".join(parts).strip()
    return text if len(text) <= MAX_EVIDENCE else text[-MAX_EVIDENCE:]
