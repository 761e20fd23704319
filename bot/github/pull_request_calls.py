"""The calls Steelframe makes once a pull request is open: reactions, reviews and their
comments, check runs and their annotations, commit statuses, Actions runs, jobs and logs,
changed files and the merge. `GitHubClient` takes them in; what they stand on (a call as
the repository's installation, a typed read, pagination, a create that survives a 5xx, a
redirect answered as is) is the client's, declared here so each call reads as one request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from bot.github.records import (
    Annotation,
    CheckRun,
    CombinedStatus,
    Job,
    JobLog,
    MergeResult,
    MergeState,
    PullFile,
    Reaction,
    Review,
    ReviewComment,
    WorkflowRun,
    record,
)
from bot.github.transport import Response, Transport

T = TypeVar("T")
STATUSES_PER_PAGE = 100  # contexts in a combined status answer (GitHub's maximum)
# A job's log is cut to its last bytes (the failure is at the end of a log).
JOB_LOG_TAIL_BYTES = 256 * 1024


class PullRequestCalls(ABC):
    """After the pull request: reviews, reactions, CI, files, merge."""

    transport: Transport

    @abstractmethod
    async def request(
        self,
        method: str,
        repo: str,
        path: str,
        *,
        payload: Any = None,
        params: dict[str, str] | None = None,
    ) -> Response: ...

    @abstractmethod
    async def get(self, repo: str, path: str, kind: type[T]) -> T: ...

    @abstractmethod
    async def paginate(
        self,
        repo: str,
        path: str,
        kind: type[T],
        *,
        params: dict[str, str] | None = None,
        key: str | None = None,
    ) -> list[T]: ...

    @abstractmethod
    async def request_redirect(self, repo: str, path: str) -> Response: ...

    @abstractmethod
    async def is_app_login(self, login: str) -> bool: ...

    @abstractmethod
    async def _create(
        self,
        repo: str,
        path: str,
        payload: dict[str, Any],
        kind: type[T],
        made_already: Callable[[], Awaitable[T | None]],
    ) -> T: ...

    async def react_to_issue_comment(
        self, repo: str, comment_id: int, content: str = "eyes"
    ) -> Reaction:
        """React to an issue (or pull request conversation) comment; reacting twice with
        the same content answers the first reaction (GitHub's 200), so a retry is safe."""
        path = f"/issues/comments/{int(comment_id)}/reactions"
        response = await self.request("POST", repo, path, payload={"content": content})
        return record(Reaction, response.data)

    async def react_to_review_comment(
        self, repo: str, comment_id: int, content: str = "eyes"
    ) -> Reaction:
        path = f"/pulls/comments/{int(comment_id)}/reactions"
        response = await self.request("POST", repo, path, payload={"content": content})
        return record(Reaction, response.data)

    async def get_review_comment(self, repo: str, comment_id: int) -> ReviewComment:
        response = await self.request("GET", repo, f"/pulls/comments/{int(comment_id)}")
        return record(ReviewComment, response.data)

    async def reply_to_review_comment(
        self, repo: str, number: int, comment_id: int, body: str
    ) -> ReviewComment:
        """Reply on the thread of review comment `comment_id` of pull request `number`.

        Sent as a review comment `in_reply_to` the thread: GitHub's description marks the
        replies endpoint (`create-reply-for-review-comment`) as not for installation tokens
        (`enabledForGitHubApps: false`). A 5xx is checked for a reply already made before
        sending again, so a retry never doubles it."""
        original = await self.get_review_comment(repo, comment_id)
        thread = original.thread_id
        payload = {
            "body": body,
            "in_reply_to": thread,
            # Required by the schema, ignored by GitHub beside in_reply_to.
            "commit_id": original.commit_id,
            "path": original.path,
        }

        async def made_already() -> ReviewComment | None:
            for item in reversed(await self.list_review_comments(repo, number)):  # newest first
                if (
                    item.in_reply_to_id == thread
                    and item.body == body
                    and item.user is not None
                    and await self.is_app_login(item.user.login)
                ):
                    return item
            return None

        path = f"/pulls/{int(number)}/comments"
        return await self._create(repo, path, payload, ReviewComment, made_already)

    async def list_review_comments(self, repo: str, number: int) -> list[ReviewComment]:
        """Every review comment of the pull request, oldest first (replies included)."""
        return await self.paginate(repo, f"/pulls/{int(number)}/comments", ReviewComment)

    async def list_reviews(self, repo: str, number: int) -> list[Review]:
        return await self.paginate(repo, f"/pulls/{int(number)}/reviews", Review)

    async def list_comments_for_review(
        self, repo: str, number: int, review_id: int
    ) -> list[ReviewComment]:
        path = f"/pulls/{int(number)}/reviews/{int(review_id)}/comments"
        return await self.paginate(repo, path, ReviewComment)

    async def get_check_run(self, repo: str, check_run_id: int) -> CheckRun:
        return await self.get(repo, f"/check-runs/{int(check_run_id)}", CheckRun)

    async def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[Annotation]:
        path = f"/check-runs/{int(check_run_id)}/annotations"
        return await self.paginate(repo, path, Annotation)

    async def list_check_runs_for_ref(self, repo: str, ref: str) -> list[CheckRun]:
        """The newest check run of each name on the commit `ref` names (sha or branch)."""
        path = f"/commits/{quote(ref, safe='/')}/check-runs"
        return await self.paginate(repo, path, CheckRun, key="check_runs")

    async def combined_status(self, repo: str, ref: str) -> CombinedStatus:
        """The commit's combined status: "failure" when any context failed or errored."""
        path = f"/commits/{quote(ref, safe='/')}/status"
        response = await self.request(
            "GET", repo, path, params={"per_page": str(STATUSES_PER_PAGE)}
        )
        return record(CombinedStatus, response.data)

    async def get_workflow_run(self, repo: str, run_id: int) -> WorkflowRun:
        return await self.get(repo, f"/actions/runs/{int(run_id)}", WorkflowRun)

    async def list_jobs(self, repo: str, run_id: int) -> list[Job]:
        path = f"/actions/runs/{int(run_id)}/jobs"
        return await self.paginate(repo, path, Job, key="jobs")

    async def download_job_log(
        self, repo: str, job_id: int, *, max_bytes: int = JOB_LOG_TAIL_BYTES
    ) -> JobLog:
        """The job's log, its last `max_bytes`. GitHub answers with a 302 to a short-lived
        signed URL; that URL is fetched without the token (it may be another host)."""
        response = await self.request_redirect(repo, f"/actions/jobs/{int(job_id)}/logs")
        raw, cut = await self.transport.download_tail(
            response.headers["Location"], max_bytes=max_bytes
        )
        return JobLog(int(job_id), raw.decode(errors="replace"), cut)

    async def list_pull_files(self, repo: str, number: int) -> list[PullFile]:
        return await self.paginate(repo, f"/pulls/{int(number)}/files", PullFile)

    async def merge_state(self, repo: str, number: int) -> MergeState:
        """Open or closed, merged or not, and whether GitHub can merge it now."""
        return await self.get(repo, f"/pulls/{int(number)}", MergeState)

    async def merge_pull(
        self, repo: str, number: int, *, sha: str | None = None, method: str = "merge"
    ) -> MergeResult:
        """Merge the pull request; `sha`: only if its head is still that commit (GitHub's
        409 otherwise, a GitHubRejected)."""
        payload: dict[str, str] = {"merge_method": method}
        if sha is not None:
            payload["sha"] = sha
        response = await self.request("PUT", repo, f"/pulls/{int(number)}/merge", payload=payload)
        return record(MergeResult, response.data)

    async def request_reviewers(self, repo: str, number: int, logins: list[str]) -> None:
        await self.request(
            "POST",
            repo,
            f"/pulls/{int(number)}/requested_reviewers",
            payload={"reviewers": list(logins)},
        )
