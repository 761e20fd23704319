"""GitHub API failures as domain errors: each carries GitHub's status and message."""

from __future__ import annotations

from typing import Any

from bot.contracts.errors import ErrorDetail
from bot.errors import NotFound, SteelframeError, Unavailable, UpstreamError


class GitHubError(SteelframeError):
    """A GitHub API call failed. `message` is GitHub's own message (safe to show: GitHub
    never echoes credentials); `github_status` is the status GitHub answered, if any."""

    def __init__(
        self,
        message: str,
        *,
        github_status: int | None = None,
        request_id: str | None = None,
        detail: ErrorDetail | None = None,
    ) -> None:
        if detail is None:
            detail = ErrorDetail(github_status=github_status, github_request_id=request_id)
        super().__init__(message, detail=detail)
        self.github_status = github_status
        self.request_id = request_id


class GitHubNotFound(GitHubError, NotFound):
    """404 (or 410): the repository, issue, label or installation does not exist or the
    App cannot see it."""


class GitHubRejected(GitHubError, UpstreamError):
    """A 4xx that retrying cannot fix (bad input, missing permission, validation failed)."""


class GitHubRateLimited(GitHubError, Unavailable):
    """Still rate limited after the bounded waits, or the wait GitHub asks for is longer
    than the policy allows. `retry_at` is the epoch second GitHub said to come back."""

    def __init__(self, message: str, *, retry_at: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_at = retry_at


class GitHubUnavailable(GitHubError, Unavailable):
    """5xx answers or network failures outlasted the retries."""
