"""The one comment on a task's pull request when Steelframe stops on failing CI: what
failed, what was tried, why it stopped. Marked, so it is posted once per pull request and
edited in place when a later stop says something new (a redelivery finds it and changes
nothing); only the App's own comment counts, as anyone can type the marker. Text from CI
(check names, reasons that quote a log) is public only after redaction, flattening and
defanging (`public_text`); a check name is shown in a code span it cannot close."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.github.issue_records import IssueComment
from bot.lifecycle.public_text import PublicPlace
from bot.lifecycle.redact import Redactor

log = logging.getLogger(__name__)
MARKER = "<!-- steelframe-ci-summary -->"
MAX_LINE = 300


class CommentApi(Protocol):
    async def list_comments(self, repo: str, number: int) -> list[IssueComment]: ...

    async def create_comment(self, repo: str, number: int, body: str) -> IssueComment: ...

    async def update_comment(self, repo: str, comment_id: int, body: str) -> IssueComment: ...

    async def is_app_login(self, login: str) -> bool: ...


@dataclass(frozen=True)
class TriedRun:
    """One fix run of the chain: the commit it worked on and what came of it."""

    number: int
    head_sha: str
    state: str
    result_sha: str | None


@dataclass(frozen=True)
class CiStop:
    repo: str
    issue: int
    pr_number: int
    head_sha: str
    checks: Sequence[str]
    tried: Sequence[TriedRun]
    reason: str


def summary_body(stop: CiStop, redactor: Redactor, github_api_url: str) -> str:
    place = PublicPlace.of(stop.repo, stop.issue, github_api_url)

    def public(text: str) -> str:
        return redactor.published(text, place, MAX_LINE)

    def code(text: str) -> str:
        # A backtick in the name would close the span and publish the rest as markdown
        # (an image, a link); replaced in what is published, after normalising made a
        # fullwidth one into "`", the span holds all of it.
        return "`" + public(text).replace("`", "'") + "`"

    checks = ", ".join(code(name) for name in stop.checks) or "(none named)"
    lines = [
        MARKER,
        "**Steelframe stopped working on the failing CI of this pull request.**",
        "",
        f"- What failed: {checks} on commit {stop.head_sha[:12]}.",
        f"- What was tried: {_tried(stop.tried)}",
        f"- Why it stopped: {public(stop.reason)}",
        "",
        "A person needs to look at it: push a fix to this branch, or re-run the checks if "
        "the failure was not the change's. Merging or closing the pull request ends the task "
        f"as usual (#{stop.issue}).",
    ]
    return "\n".join(lines) + "\n"


def _tried(tried: Sequence[TriedRun]) -> str:
    if not tried:
        return "no fix run."
    said = []
    for run in tried:
        if run.result_sha:
            outcome = f"pushed {run.result_sha[:12]}"
        elif run.state == "unchanged":
            outcome = "changed nothing"
        elif run.state in ("ended", "stopped"):
            # It failed, asked a question or was terminated (stopped: then a person was
            # asked about its commit, ci_intake).
            outcome = "ended without a fix"
        else:
            outcome = run.state
        said.append(f"fix run {run.number} on {run.head_sha[:12]} ({outcome})")
    return "; ".join(said) + "."


async def post_summary(github: CommentApi, repo: str, number: int, body: str) -> int | None:
    """The summary on pull request `number`: created, or the App's marked comment edited
    when it says something else; the comment's id (None if GitHub failed: logged). A
    marked comment by anyone else is theirs: left as it is."""
    try:
        for comment in await github.list_comments(repo, number):
            if MARKER in comment.body and await github.is_app_login(comment.author):
                if comment.body != body:
                    await github.update_comment(repo, comment.id, body)
                return comment.id
        return (await github.create_comment(repo, number, body)).id
    except Exception as exc:  # said again by the next delivery about the commit
        log.warning("lifecycle: CI summary on %s#%s not posted: %s", repo, number, exc)
        return None
