"""Reviews on a task's pull request: acknowledged at once, and every thread in the ledger.

A review comment (`pull_request_review_comment` created) or a submitted review with text
(`pull_request_review` submitted, changes requested or commented) by a person with write
access gets Steelframe's `eyes` reaction within seconds of the webhook, and its thread a
row in `review_threads` (`open`). GitHub has no reactions on a review itself (its REST API
reacts to issues, issue comments, review comments, commit comments and releases), so a
review's own text is acknowledged by one short comment on the pull request naming the
review; the comments of a review arrive as review-comment webhooks and get their reaction
there. Readers, bots, the App itself, pull requests Steelframe did not open and tasks that
are terminated, archived, merged or closed: one log line, nothing else.

Idempotent: GitHub answers a repeated reaction with the first one; the acknowledgement is
recorded (`review_acks`) with the thread and the webhook handler's done-record in one
transaction after GitHub answered, so a redelivery under any id makes no second call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.github.errors import GitHubNotFound
from bot.github.records import Review, ReviewComment, record
from bot.handler_runs import record_done
from bot.lifecycle.access import may_review
from bot.lifecycle.models import (
    EventKind,
    ReviewAck,
    ReviewThread,
    Task,
    TaskEvent,
    ThreadKind,
    ThreadState,
)
from bot.lifecycle.pull_end import task_of_pull
from bot.lifecycle.seams import GitHubApi
from bot.lifecycle.states import FINAL, TaskState
from bot.lifecycle.transition import Move, Transitioned, apply, publish

log = logging.getLogger(__name__)
# Review text kept in the ledger (and later handed to a run) at most; GitHub allows 65,536
# characters per comment, so this only cuts what something else wrote.
MAX_REVIEW_TEXT = 64 * 1024
CUT_NOTE = "\n\n[Steelframe cut this review text at 64 KB; the rest is on GitHub.]"
# Reviews that ask something of the change (an approval asks nothing).
ACTIONABLE_REVIEWS = frozenset({"CHANGES_REQUESTED", "COMMENTED"})
ACK_PREFIX = "<!-- steelframe-review-ack "
# A dismissed review's state in GitHub's REST answers (`pulls/list-reviews`).
DISMISSED_STATE = "DISMISSED"
EYES = "eyes"
# Who queues a review run (the actor of its move to queued, `review_pickup`).
PICKUP_ACTOR = "review"
DISMISS_ACTOR = "webhook:pull_request_review.dismissed"


@dataclass(frozen=True)
class PullOf:
    """The pull request a review event is about, as the lifecycle reads it."""

    repo: str
    number: int
    head_ref: str
    head_repo: str
    author: str


ALREADY = "already acknowledged"
DISMISSED = "the review was dismissed on GitHub"
DELETED = "the comment was deleted on GitHub"


@dataclass(frozen=True)
class ReviewPickup:
    task_id: int | None
    acknowledged: bool
    reason: str

    @property
    def accepted(self) -> bool:
        """A writer's review of a task's pull request (now or by an earlier delivery): its
        thread is in the ledger, and may ask for a review run."""
        return self.task_id is not None and (self.acknowledged or self.reason == ALREADY)


def pull_of(payload: dict[str, Any]) -> PullOf:
    """The handler's needs (repository name, pull request number) were checked; a signed
    payload may still hold another type than GitHub's elsewhere (a text `head`): such a
    part reads as empty, never an AttributeError retried until the delivery is dead."""
    pull = _object(payload.get("pull_request"))
    head = _object(pull.get("head"))
    return PullOf(
        repo=str(payload["repository"]["full_name"]),
        number=int(pull["number"]),
        head_ref=str(head.get("ref") or ""),
        head_repo=str(_object(head.get("repo")).get("full_name") or ""),
        author=str(_object(pull.get("user")).get("login") or ""),
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def pinned_text(text: str | None) -> str:
    """Review text as the ledger keeps it: cut at MAX_REVIEW_TEXT with a note."""
    text = text or ""
    if len(text.encode()) <= MAX_REVIEW_TEXT:
        return text
    return text.encode()[:MAX_REVIEW_TEXT].decode(errors="ignore") + CUT_NOTE


def ack_marker(review_id: int) -> str:
    return f"{ACK_PREFIX}review={review_id} -->"


class ReviewIntake:
    """What the webhooks do with reviews of a task's pull request (no HTTP here)."""

    def __init__(self, *, db: Database, github: GitHubApi | None, clock: Clock = utcnow) -> None:
        self.db = db
        self.github = github
        self.clock = clock

    async def on_review_comment(self, payload: dict[str, Any]) -> ReviewPickup:
        pull = pull_of(payload)
        comment = record(ReviewComment, payload.get("comment"))
        user = comment.user
        found = await self._accepted(pull, user.login if user else "", user.type if user else "")
        if isinstance(found, ReviewPickup):
            return self._ignored(pull, f"review comment {comment.id}", found)
        task_id = found
        if await self.db.run(_acked, ThreadKind.COMMENT, comment.id):
            return ReviewPickup(task_id, False, ALREADY)
        assert self.github is not None  # _accepted checked it
        try:
            reaction = await self.github.react_to_review_comment(pull.repo, comment.id, EYES)
        except GitHubNotFound:
            # Deleted before this delivery was read (at once, or behind a backlog): nothing
            # asks anything any more; a retry would meet the same 404 until dead.
            gone = ReviewPickup(task_id, False, DELETED)
            return self._ignored(pull, f"review comment {comment.id}", gone)
        await self.db.run(_record_comment, task_id, pull, comment, reaction.id, self.clock)
        log.info("lifecycle: task %s review comment %s acknowledged", task_id, comment.id)
        return ReviewPickup(task_id, True, "acknowledged")

    async def on_review(self, payload: dict[str, Any]) -> ReviewPickup:
        pull = pull_of(payload)
        review = record(Review, payload.get("review"))
        user = review.user
        what = f"review {review.id}"
        if review.state.upper() not in ACTIONABLE_REVIEWS or not (review.body or "").strip():
            # Its comments (if any) come as review-comment webhooks; an approval asks nothing.
            return self._ignored(pull, what, ReviewPickup(None, False, "no review text to act on"))
        found = await self._accepted(pull, user.login if user else "", user.type if user else "")
        if isinstance(found, ReviewPickup):
            return self._ignored(pull, what, found)
        task_id = found
        if await self.db.run(_dismissed, task_id, review.id):
            return self._ignored(pull, what, ReviewPickup(task_id, False, DISMISSED))
        if await self.db.run(_acked, ThreadKind.REVIEW, review.id):
            return ReviewPickup(task_id, False, ALREADY)
        comment_id = await self._acknowledge_review(pull, review)
        await self.db.run(_record_review, task_id, pull, review, comment_id, self.clock)
        log.info("lifecycle: task %s review %s acknowledged", task_id, review.id)
        return ReviewPickup(task_id, True, "acknowledged")

    async def on_review_dismissed(self, payload: dict[str, Any]) -> ReviewPickup:
        """A review dismissed on GitHub no longer asks anything: its thread, if still open,
        is declined with the reason (a run already queued then finds no review work; a run
        that took it up posts no answer to it: `review_run`). Deliveries are not ordered: a
        dismissal arriving before its `submitted` records the declined thread first, and the
        submission is then not acknowledged nor run."""
        pull = pull_of(payload)
        review = record(Review, payload.get("review"))
        what = f"dismissal of review {review.id}"
        task = await self._task_of(pull)
        if isinstance(task, ReviewPickup):
            return self._ignored(pull, what, task)
        said, moved = await self.db.run(_dismiss, task.id, pull, review, self.clock)
        log.info("lifecycle: task %s review %s dismissed: %s", task.id, review.id, said)
        if moved is not None:
            await publish(self.db, self.github, moved, clock=self.clock)
        return ReviewPickup(task.id, False, said)

    async def on_review_comment_changed(self, payload: dict[str, Any]) -> ReviewPickup:
        """A thread's first comment edited or deleted on GitHub before a run took the thread
        up: the run is given the text as it is now (edited), or the thread is declined with
        the reason (deleted). Replies need nothing: a run reads them from GitHub."""
        pull = pull_of(payload)
        comment = record(ReviewComment, payload.get("comment"))
        action = str(payload.get("action") or "")
        what = f"review comment {comment.id} {action}"
        task = await self._task_of(pull)
        if isinstance(task, ReviewPickup):
            return self._ignored(pull, what, task)
        deleted = action == "deleted"
        said = await self.db.run(_comment_changed, task.id, comment, deleted, self.clock)
        log.info("lifecycle: task %s %s: %s", task.id, what, said)
        return ReviewPickup(task.id, False, said)

    async def _acknowledge_review(self, pull: PullOf, review: Review) -> int:
        """One comment on the pull request naming the review (found by its marker after a
        crash between posting and recording it: the App's own comment only, as anyone can
        type the marker and so keep the review unacknowledged)."""
        assert self.github is not None
        marker = ack_marker(review.id)
        for existing in await self.github.list_comments(pull.repo, pull.number):
            if marker in existing.body and await self.github.is_app_login(existing.author):
                return existing.id
        who = f"@{review.user.login}" if review.user else "the reviewer"
        body = f"{marker}\n👀 Steelframe picked up the review by {who}: {review.html_url}".strip()
        return (await self.github.create_comment(pull.repo, pull.number, body)).id

    async def _accepted(self, pull: PullOf, login: str, user_type: str) -> int | ReviewPickup:
        """The task whose pull request this is, if the review may steer it; else why not."""
        task = await self._task_of(pull)
        if isinstance(task, ReviewPickup):
            return task
        assert self.github is not None  # _task_of checked it
        if task.archived or task.state == TaskState.TERMINATED or task.state in FINAL:
            state = "archived" if task.archived else task.state
            return ReviewPickup(task.id, False, f"the task is {state}")
        allowed, why = await may_review(self.github, pull.repo, login, user_type=user_type)
        if not allowed:
            return ReviewPickup(task.id, False, why)
        return task.id

    async def _task_of(self, pull: PullOf) -> Task | ReviewPickup:
        """The task of a pull request Steelframe opened; else why it has none."""
        if self.github is None or not await self.github.is_app_login(pull.author):
            return ReviewPickup(None, False, "not a pull request Steelframe opened")
        task = await self.db.run(
            task_of_pull, pull.repo, pull.number, pull.head_ref, pull.head_repo
        )
        if task is None:
            return ReviewPickup(None, False, "no task has this pull request")
        return task

    @staticmethod
    def _ignored(pull: PullOf, what: str, result: ReviewPickup) -> ReviewPickup:
        log.info("lifecycle: %s on %s#%s ignored: %s", what, pull.repo, pull.number, result.reason)
        return result


def _acked(session: Session, kind: ThreadKind, github_id: int) -> bool:
    return session.get(ReviewAck, (str(kind), github_id)) is not None


def _ack(
    session: Session, task_id: int, kind: ThreadKind, github_id: int, answer: int, clock: Clock
) -> None:
    if session.get(ReviewAck, (str(kind), github_id)) is None:
        session.add(
            ReviewAck(kind=kind, github_id=github_id, task_id=task_id, answer_id=answer, at=clock())
        )


def _record_comment(
    session: Session,
    task_id: int,
    pull: PullOf,
    comment: ReviewComment,
    reaction_id: int,
    clock: Clock,
) -> None:
    """The comment's thread in the ledger (a reply by a writer opens its thread again) and
    the acknowledgement, with the handler's done-record."""
    root = comment.thread_id
    thread = _thread(session, task_id, ThreadKind.COMMENT, root)
    now = clock()
    if thread is None:
        # A comment of a review already dismissed asks nothing (its dismissal came first).
        gone = _dismissed(session, task_id, comment.pull_request_review_id)
        session.add(
            ReviewThread(
                task_id=task_id,
                kind=ThreadKind.COMMENT,
                root_id=root,
                pr_number=pull.number,
                path=comment.path,
                line=comment.line,
                author=comment.user.login if comment.user else "",
                state=ThreadState.DECLINED if gone else ThreadState.OPEN,
                reason=DISMISSED if gone else None,
                text=pinned_text(comment.body),
                url=comment.html_url or None,
                created_at=now,
                updated_at=now,
                # Known only from the root (a reply delivered first leaves them for it).
                review_id=comment.pull_request_review_id if comment.id == root else None,
                source_updated_at=comment.changed_at if comment.id == root else None,
            )
        )
    elif comment.id == root:
        # The thread's first comment, delivered after a reply to it (its first delivery
        # failed and was retried): what the thread asks, not a new request by itself.
        _root_arrived(session, thread, comment, now)
    elif thread.state != ThreadState.OPEN or thread.picked_job is not None:
        # Open again and not taken up: the writer's reply asks for another review run.
        thread.state, thread.reason, thread.updated_at = ThreadState.OPEN, None, now
        thread.picked_job = None
    else:
        # Waiting for a run: a run taking it up now listed its replies before this one,
        # and leaves it to the next (bot.lifecycle.review_pickup), which sees them all.
        thread.updated_at = now
    _ack(session, task_id, ThreadKind.COMMENT, comment.id, reaction_id, clock)
    record_done(session)


def _root_arrived(
    session: Session, thread: ReviewThread, comment: ReviewComment, now: datetime
) -> None:
    """A thread first recorded from a reply takes its root's text and place, unless a run
    took it up already (that run read the thread from GitHub) or a newer edit is in; and,
    its review known now, is declined if that review was dismissed."""
    thread.review_id = comment.pull_request_review_id
    if thread.picked_job is not None or thread.state != ThreadState.OPEN:
        return
    if _dismissed(session, thread.task_id, thread.review_id):
        thread.state, thread.reason, thread.updated_at = ThreadState.DECLINED, DISMISSED, now
        return
    if not _newer(comment, thread):
        return
    thread.text, thread.source_updated_at = pinned_text(comment.body), comment.changed_at
    thread.path, thread.line, thread.url = comment.path, comment.line, comment.html_url or None
    thread.author = comment.user.login if comment.user else thread.author
    thread.updated_at = now


def _newer(comment: ReviewComment, thread: ReviewThread, *, same_second: bool = False) -> bool:
    """Whether `comment` is a newer text of the thread's root than the one recorded (an
    edit delivered after a later edit, or the creation after an edit, is not).
    `same_second`: one changed in the recorded text's second counts as newer (GitHub's
    times are whole seconds, and an edit comes after what it edits)."""
    recorded, changed = thread.source_updated_at, comment.changed_at
    if recorded is None or changed is None:
        return True
    return changed >= recorded if same_second else changed > recorded


def _record_review(
    session: Session, task_id: int, pull: PullOf, review: Review, comment_id: int, clock: Clock
) -> None:
    now = clock()
    if _thread(session, task_id, ThreadKind.REVIEW, review.id) is None:
        session.add(_review_thread(task_id, pull, review, ThreadState.OPEN, now))
    _ack(session, task_id, ThreadKind.REVIEW, review.id, comment_id, clock)
    record_done(session)


def _review_thread(
    task_id: int,
    pull: PullOf,
    review: Review,
    state: ThreadState,
    now: datetime,
    *,
    reason: str | None = None,
) -> ReviewThread:
    """A review's ledger row: a submitted review's (open) or a dismissed one's (declined)."""
    return ReviewThread(
        task_id=task_id,
        kind=ThreadKind.REVIEW,
        root_id=review.id,
        pr_number=pull.number,
        author=review.user.login if review.user else "",
        state=state,
        reason=reason,
        text=pinned_text(review.body),
        url=review.html_url or None,
        created_at=now,
        updated_at=now,
    )


def _dismissed(session: Session, task_id: int, review_id: int | None) -> bool:
    if review_id is None:
        return False
    thread = _thread(session, task_id, ThreadKind.REVIEW, review_id, locked=False)  # a read
    return thread is not None and thread.reason == DISMISSED


def dismissed_reviews(session: Session, task_id: int, review_ids: list[int]) -> set[int]:
    """Which of the reviews `review_ids` of the task were dismissed on GitHub (as the
    `pull_request_review.dismissed` webhook recorded)."""
    if not review_ids:
        return set()
    found = session.scalars(
        select(ReviewThread.root_id).where(
            ReviewThread.task_id == task_id,
            ReviewThread.kind == ThreadKind.REVIEW,
            ReviewThread.root_id.in_(review_ids),
            ReviewThread.reason == DISMISSED,
        )
    )
    return set(found)


def decline_dismissed(
    session: Session, task_id: int, review_ids: list[int], clock: Clock
) -> list[int]:
    """The still-open threads of `review_ids` (reviews GitHub says are dismissed, read by a
    run whose dismissal webhook was lost or is late) declined as `_dismiss` declines them;
    the reviews whose thread this declined."""
    threads = session.scalars(
        select(ReviewThread).where(
            ReviewThread.task_id == task_id,
            ReviewThread.kind == ThreadKind.REVIEW,
            ReviewThread.root_id.in_(review_ids),
            ReviewThread.state.in_([ThreadState.OPEN, ThreadState.NEEDS_OPERATOR]),
        )
    )
    declined = []
    for thread in threads:
        thread.state, thread.reason, thread.updated_at = ThreadState.DECLINED, DISMISSED, clock()
        declined.append(thread.root_id)
    for review_id in review_ids:
        _decline_comments_of(session, task_id, review_id, clock())
    return declined


def _decline_comments_of(session: Session, task_id: int, review_id: int, now: datetime) -> int:
    """The open comment threads a dismissed review opened, declined as its own thread is
    (taken up by a run or not: the run replies only on threads still open); how many."""
    threads = session.scalars(
        select(ReviewThread)
        .where(
            ReviewThread.task_id == task_id,
            ReviewThread.kind == ThreadKind.COMMENT,
            ReviewThread.review_id == review_id,
            ReviewThread.state == ThreadState.OPEN,
        )
        .with_for_update()
    )
    declined = 0
    for thread in threads:
        thread.state, thread.reason, thread.updated_at = ThreadState.DECLINED, DISMISSED, now
        declined += 1
    return declined


@dataclass(frozen=True)
class BeforePickup:
    """The state a task had when its review run was asked, and its error if it had failed."""

    state: TaskState
    error: str = ""


def before_pickup(session: Session, task_id: int) -> BeforePickup:
    """Read from the task's events: its last move to queued for a review run, and (from a
    failed task) the failure before it. Delivered when no such move is found."""
    queued = session.scalar(
        select(TaskEvent)
        .where(
            TaskEvent.task_id == task_id,
            TaskEvent.kind == EventKind.TRANSITION,
            TaskEvent.to_state == TaskState.QUEUED,
            TaskEvent.actor == PICKUP_ACTOR,
        )
        .order_by(TaskEvent.id.desc())
        .limit(1)
    )
    if queued is None or queued.from_state != TaskState.FAILED:
        return BeforePickup(TaskState.DELIVERED)
    failed = session.scalar(
        select(TaskEvent)
        .where(
            TaskEvent.task_id == task_id,
            TaskEvent.kind == EventKind.TRANSITION,
            TaskEvent.to_state == TaskState.FAILED,
            TaskEvent.id < queued.id,
        )
        .order_by(TaskEvent.id.desc())
        .limit(1)
    )
    error = str((failed.data or {}).get("error") or "") if failed is not None else ""
    return BeforePickup(TaskState.FAILED, error or "unknown error")


def _dismiss(
    session: Session, task_id: int, pull: PullOf, review: Review, clock: Clock
) -> tuple[str, Transitioned | None]:
    """The review's thread declined as dismissed (recorded first when the dismissal came
    before the submission), with the handler's done-record; what was done, in words, and
    the task's move when the question it waited on was only about this review."""
    now = clock()
    thread = _thread(session, task_id, ThreadKind.REVIEW, review.id)
    moved = None
    if thread is None:
        session.add(
            _review_thread(task_id, pull, review, ThreadState.DECLINED, now, reason=DISMISSED)
        )
        said = "recorded as dismissed before its submission arrived"
    elif thread.state == ThreadState.NEEDS_OPERATOR and _resumed(session, task_id):
        # A Decision already started the run that takes it up again: left for that run,
        # which reads the dismissal from GitHub and answers nothing (`review_run`).
        said = "its thread waits for the run a Decision started, which does not answer it"
    elif thread.state == ThreadState.NEEDS_OPERATOR:
        # Its question asks nothing any more: declined as any dismissed thread, and the
        # task stops waiting when no other thread waits on the question.
        thread.state, thread.reason, thread.updated_at = ThreadState.DECLINED, DISMISSED, now
        said = "its thread, waiting on an operator's question, declined"
        moved = _question_moot(session, task_id, f"review:{review.id}", clock)
        if moved is not None:
            said += f"; the question was only about it: the task is {moved.state} again"
    elif thread.state == ThreadState.OPEN:
        # Taken up by a run or not, the dismissed review is answered by nobody: the run
        # replies only on threads still open (`thread_answers.answer_threads`) and drops
        # its answer to this one (`review_run`).
        taken = thread.picked_job
        thread.state, thread.reason, thread.updated_at = ThreadState.DECLINED, DISMISSED, now
        said = (
            "its thread declined before any run took it up"
            if taken is None
            else f"its thread declined; the run that took it up ({taken}) does not answer it"
        )
    else:
        said = f"its thread is {thread.state} (taken up by {thread.picked_job}): left as it is"
    if comments := _decline_comments_of(session, task_id, review.id, now):
        said += f"; {comments} of its comment threads declined"
    record_done(session)
    return said, moved


def _resumed(session: Session, task_id: int) -> bool:
    task = session.get(Task, task_id)
    return task is not None and bool(task.pending_decision)


def _question_moot(session: Session, task_id: int, key: str, clock: Clock) -> Transitioned | None:
    """A task waiting (no Decision yet) on a review question no thread waits on any more
    goes back to the state it had before the review pickup, the events saying why."""
    session.flush()
    task = session.get(Task, task_id)
    waiting = session.scalar(
        select(ReviewThread.id)
        .where(ReviewThread.task_id == task_id, ReviewThread.state == ThreadState.NEEDS_OPERATOR)
        .limit(1)
    )
    if task is None or task.state != TaskState.WAITING_FOR_INFO or task.pending_decision:
        return None
    if waiting is not None:
        return None
    why = f"the question is moot: the review it was about ({key}) was dismissed"
    before = before_pickup(session, task_id)
    failed = before.state == TaskState.FAILED
    back = Move(
        before.state,
        actor=DISMISS_ACTOR,
        detail=f"{why}; {before.state} as before the review",
        data={"error": before.error, "limit": None} if failed else {"pr_url": task.pr_url},
        expect=[TaskState.WAITING_FOR_INFO],
        changes={
            "question": None,
            "pending_decision": None,
            "last_error": before.error if failed else None,
        },
        note=why[:1].upper() + why[1:] + ".",
    )
    return apply(session, task_id, back, clock)


def _comment_changed(
    session: Session, task_id: int, comment: ReviewComment, deleted: bool, clock: Clock
) -> str:
    """The thread `comment` opened, brought up to date if no run has taken it up; what was
    done, in words (with the handler's done-record)."""
    thread = _thread(session, task_id, ThreadKind.COMMENT, comment.id)
    if thread is None or comment.thread_id != comment.id:
        said = "not the first comment of a thread in the ledger"
    elif thread.state != ThreadState.OPEN or thread.picked_job is not None:
        said = f"its thread is {thread.state} (taken up by {thread.picked_job}): left as it is"
    elif deleted:
        thread.state, thread.reason, thread.updated_at = ThreadState.DECLINED, DELETED, clock()
        said = "its thread declined before any run took it up"
    elif not _newer(comment, thread, same_second=True):
        said = "an older edit than the text recorded: left as it is"
    else:
        thread.text, thread.updated_at = pinned_text(comment.body), clock()
        thread.source_updated_at = comment.changed_at
        said = "its thread's text is the edited one"
    record_done(session)
    return said


def _thread(
    session: Session, task_id: int, kind: ThreadKind, root: int, *, locked: bool = True
) -> ReviewThread | None:
    """The thread; `locked` (for every caller that changes it according to what it read):
    held until this transaction ends, since a review run takes up and settles threads
    meanwhile (a reopen read as open and not taken up, just as a run settled it, left it
    settled for good)."""
    query = select(ReviewThread).where(
        ReviewThread.task_id == task_id,
        ReviewThread.kind == kind,
        ReviewThread.root_id == root,
    )
    return session.scalar(query.with_for_update() if locked else query)
