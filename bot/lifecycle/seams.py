"""The seams the lifecycle depends on, as Protocols: the GitHub App client and memory.

`bot.github.client.GitHubClient` satisfies `GitHubApi` (tests run it against the local
GitHub sandbox) and `memory.Memory` satisfies `Memory`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

from bot.github.issue_records import Issue, IssueComment, Label, PullRequest
from bot.github.records import Reaction, Review, ReviewComment

if TYPE_CHECKING:  # names only: importing memory's index code costs a worker ~1 s at start
    from memory import ChunkIn, Hit


class GitHubApi(Protocol):
    async def get_issue(self, repo: str, number: int) -> Issue: ...

    async def add_labels(
        self, repo: str, number: int, labels: list[str] | tuple[str, ...]
    ) -> list[Label]: ...

    async def remove_label(self, repo: str, number: int, label: str) -> bool: ...

    async def create_comment(self, repo: str, number: int, body: str) -> IssueComment: ...

    async def update_comment(self, repo: str, comment_id: int, body: str) -> IssueComment: ...

    async def list_comments(self, repo: str, number: int) -> list[IssueComment]: ...

    async def create_pull(
        self, repo: str, *, title: str, head: str, base: str, body: str, draft: bool = False
    ) -> PullRequest: ...

    async def list_pulls(
        self, repo: str, *, head: str | None = None, state: str = "open"
    ) -> list[PullRequest]: ...

    async def collaborator_permission(self, repo: str, username: str) -> str: ...

    async def scoped_token(self, repo: str, permissions: dict[str, str]) -> str: ...

    async def is_app_login(self, login: str) -> bool: ...

    async def react_to_review_comment(
        self, repo: str, comment_id: int, content: str = "eyes"
    ) -> Reaction: ...

    async def list_review_comments(self, repo: str, number: int) -> list[ReviewComment]: ...

    async def list_reviews(self, repo: str, number: int) -> list[Review]: ...

    async def reply_to_review_comment(
        self, repo: str, number: int, comment_id: int, body: str
    ) -> ReviewComment: ...

    async def request(
        self,
        method: str,
        repo: str,
        path: str,
        *,
        payload: Any = None,
        params: dict[str, str] | None = None,
    ) -> Any: ...


class GitHubFactory(Protocol):
    """A client for the current event loop (each job runs its own loop)."""

    def __call__(self) -> AbstractAsyncContextManager[GitHubApi]: ...


class Memory(Protocol):
    """The slice of `memory.Memory` the worker uses: Chat's own search, and adding chunks."""

    def search(
        self, query: str, *, repo: str | None, focus: int | None = None, k: int = 8
    ) -> Sequence[Hit]: ...

    def add(self, items: Sequence[ChunkIn]) -> Any: ...
