"""The focused issue as a turn sees it: title, body, labels, the last comments and the pull
request Steelframe opened for it, read from GitHub each turn and handed to the prompt as
untrusted data with provenance, within a budget (issue 13: Discuss loads its issue).

Steelframe's own status comments (progress, notices) are left out: the task JSON says the
same, and their markers must never reach a reply. A comment is one only when the App wrote
it: a person's comment carrying a marker is theirs, kept as any comment is. Markers in what
is kept are removed.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from bot.chat.blocks import untrusted
from bot.contracts.turn_meta import IssueFactsMeta, LinkedPullMeta
from bot.errors import NotFound
from bot.github.issue_records import Issue, IssueComment, PullRequest
from bot.markers import opens_as_status

log = logging.getLogger(__name__)
BODY_CHARS = 4_000
COMMENT_CHARS = 1_000
LAST_COMMENTS = 5
BUDGET_CHARS = 9_000  # the whole block; the oldest kept comments go first when over
_MARKER = re.compile(r"<!--.*?-->", re.DOTALL)


class IssueReader(Protocol):
    """The slice of bot.github.client.GitHubClient the issue context needs."""

    async def get_issue(self, repo: str, number: int) -> Issue: ...

    async def list_comments(self, repo: str, number: int) -> list[IssueComment]: ...

    async def list_pulls(
        self, repo: str, *, head: str | None = None, state: str = "open"
    ) -> list[PullRequest]: ...

    async def is_app_login(self, login: str) -> bool: ...


@dataclass(frozen=True)
class IssueContext:
    repo: str
    number: int
    title: str
    state: str
    labels: list[str]
    url: str
    body: str
    # The last comments (bodies cleaned and cut) and the pull request of Steelframe's branch,
    # as the GitHub client's records.
    comments: list[IssueComment] = field(default_factory=list)
    pull: PullRequest | None = None
    is_pull: bool = False

    def facts(self) -> IssueFactsMeta:
        """What the turn's facts and metadata carry (no bodies: they are in the prompt)."""
        return {
            "repo": self.repo,
            "number": self.number,
            "title": self.title,
            "state": self.state,
            "labels": self.labels,
            "url": self.url,
            "comments": len(self.comments),
            "pull": None if self.pull is None else _pull_facts(self.pull),
        }

    def prompt_block(self) -> str:
        """The issue as untrusted data with provenance, within BUDGET_CHARS."""
        kind = "pull request" if self.is_pull else "issue"
        head = untrusted(
            f"{self.title}\n\n{self.body}".strip(),
            source=f"github_{kind.replace(' ', '_')}",
            repo=self.repo,
            number=self.number,
            state=self.state,
            labels=", ".join(self.labels),
            url=self.url,
        )
        parts = [head]
        if self.pull is not None:
            parts.append(
                untrusted(
                    f"{self.pull.title} ({self.pull.shown_state})",
                    source="github_linked_pull_request",
                    number=self.pull.number,
                    url=self.pull.html_url,
                )
            )
        comments = [
            untrusted(
                c.body, source="github_comment", author=c.author or "unknown", created=c.created_at
            )
            for c in self.comments
        ]
        while comments and len("\n".join([*parts, *comments])) > BUDGET_CHARS:
            comments.pop(0)  # the oldest kept comment goes first
        omitted = len(self.comments) - len(comments)
        if omitted:
            parts.append(f"({omitted} older comment(s) left out for size)")
        return "\n".join([*parts, *comments])


class IssueContextLoader:
    def __init__(self, github: IssueReader) -> None:
        self.github = github

    async def exists(self, repo: str, number: int) -> bool:
        try:
            await self.github.get_issue(repo, number)
        except NotFound:
            return False
        return True

    async def load(self, repo: str, number: int) -> IssueContext:
        """Read the issue (NotFound when GitHub has none), its last comments and its PR."""
        issue = await self.github.get_issue(repo, number)
        comments = await self.github.list_comments(repo, number)
        kept = [c for c in comments if not await self._app_status(c)]
        return IssueContext(
            repo=repo,
            number=number,
            title=issue.title,
            state=issue.state,
            labels=issue.label_names,
            url=issue.html_url,
            body=_clean(issue.body, BODY_CHARS),
            comments=[_comment(c) for c in kept[-LAST_COMMENTS:]],
            pull=await self._pull(repo, number),
            is_pull=issue.is_pull,
        )

    async def _app_status(self, comment: IssueComment) -> bool:
        """Steelframe's own progress comment or notice: laid out as one, by the App."""
        return opens_as_status(comment.body) and await self.github.is_app_login(comment.author)

    async def _pull(self, repo: str, number: int) -> PullRequest | None:
        """The pull request of Steelframe's branch for the issue, if one was opened."""
        try:
            pulls = await self.github.list_pulls(
                repo, head=f"steelframe/issue-{number}", state="all"
            )
        except Exception as exc:  # the issue itself is what matters; the PR is a bonus
            log.warning("linked PR of %s#%s not read: %s", repo, number, type(exc).__name__)
            return None
        return pulls[0] if pulls else None


def _pull_facts(pull: PullRequest) -> LinkedPullMeta:
    """The linked pull request as the turn's stored metadata has always carried it."""
    return {
        "number": pull.number,
        "title": pull.title,
        "state": pull.shown_state,
        "url": pull.html_url,
    }


def _comment(comment: IssueComment) -> IssueComment:
    return msgspec.structs.replace(comment, body=_clean(comment.body, COMMENT_CHARS))


def _clean(text: Any, limit: int) -> str:
    flat = _MARKER.sub("", str(text or "")).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
