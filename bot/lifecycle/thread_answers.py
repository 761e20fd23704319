"""Answering review threads after a run: one reply on each thread (what changed and the
commit, why it was declined, or the agent's question) and its ledger row settled.

What a review run (bot.lifecycle.review_run) calls when it ends. Replies carry a marker
naming the thread and the run, so a crash between replying and settling the row finds the
reply instead of posting a second: within the run (`_reply_once`), and in the run that
retries it after its worker died (`settle_replied`: the retry has a job of its own, so its
marker would not match; the row is settled from the dead run's reply, as GitHub shows it,
before the retry takes threads up). Only the App's own replies count: anyone can type a
marker. A settled thread is never answered again. The answer text comes from the agent:
the caller passes it redacted for the public and bounded (`Run.public_block`), as every
other text the run posts, and it is published whole: cutting text already made public
could drop a code span's closing backtick or split an escape or a reference, and show what
the rules hid (`public_text.within`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.github.records import MAX_BODY
from bot.lifecycle.models import ReviewThread, Task, ThreadKind, ThreadState
from bot.lifecycle.seams import GitHubApi

log = logging.getLogger(__name__)
ANSWER_PREFIX = "<!-- steelframe-thread-answer "
# An answer's text is bounded where it is made public (`Run.public_block`: 4000 characters,
# perhaps after a sentence of the worker's); this only keeps a reply within what GitHub
# takes in a comment, with room for the marker and head line. Longer, it is withheld:
# never cut.
MAX_ANSWER = MAX_BODY - 536
TOO_LONG = "(Steelframe withheld this answer: it was longer than a reply on GitHub can be.)"
SETTLED = frozenset({ThreadState.ADDRESSED, ThreadState.DECLINED, ThreadState.NEEDS_OPERATOR})


@dataclass(frozen=True)
class ThreadAnswer:
    kind: ThreadKind
    root_id: int
    state: ThreadState  # one of SETTLED
    text: str  # public: already redacted (and bounded) by the caller; never cut after
    commit: str | None = None  # the fix (addressed)


def answer_marker(kind: ThreadKind, root_id: int, job: str | None = None) -> str:
    """Names the thread and the review run answering it (a thread asked again, or whose
    question a Decision answered, gets the next run's reply too)."""
    return f"{ANSWER_PREFIX}{kind}={root_id}{f' job={job}' if job else ''} -->"


# A reply's first line after the marker, per state ("Addressed in <commit>." with a commit).
HEADS = {
    ThreadState.ADDRESSED: "Addressed.",
    ThreadState.DECLINED: "Not changed.",
    ThreadState.NEEDS_OPERATOR: "Steelframe has a question before changing this:",
}
ADDRESSED_IN = re.compile(r"Addressed in ([0-9a-f]{7,64})\.")


def answer_text(answer: ThreadAnswer) -> str:
    """The text the reply publishes (and the ledger keeps): the answer's whole, or TOO_LONG
    in its place. Never a slice of it: it is public already, and a cut could end inside a
    code span or an escape and show a link or an image the rules had hidden."""
    text = answer.text.strip()
    return text if len(text) <= MAX_ANSWER else TOO_LONG


def answer_body(answer: ThreadAnswer, job: str | None = None) -> str:
    head = HEADS[answer.state]
    if answer.state == ThreadState.ADDRESSED and answer.commit:
        head = f"Addressed in {answer.commit}."
    text = answer_text(answer)
    return f"{answer_marker(answer.kind, answer.root_id, job)}\n{head}\n\n{text}".rstrip()


def read_answer(kind: ThreadKind, root_id: int, job: str, body: str) -> ThreadAnswer | None:
    """The answer a reply of `answer_body(..., job)` gave, or None if `body` is not one."""
    marker, _, rest = body.partition("\n")
    if marker.strip() != answer_marker(kind, root_id, job):
        return None
    head, _, text = rest.partition("\n")
    head, text = head.strip(), text.strip()
    if found := ADDRESSED_IN.fullmatch(head):
        return ThreadAnswer(kind, root_id, ThreadState.ADDRESSED, text, found[1])
    state = next((state for state, said in HEADS.items() if said == head), None)
    return None if state is None else ThreadAnswer(kind, root_id, state, text)


async def answer_threads(
    db: Database,
    github: GitHubApi,
    task_id: int,
    answers: list[ThreadAnswer],
    *,
    job: str | None = None,
    clock: Clock = utcnow,
) -> int:
    """Reply on each still-open thread named in `answers` and settle its row; how many
    were answered now (a settled or unknown thread is skipped). `job`: only threads that
    review run still holds (a writer's reply since reopened it for the next run)."""
    task = await db.run(lambda s: s.get(Task, task_id))
    if task is None:
        return 0
    answered = 0
    for answer in answers:
        if answer.state not in SETTLED:
            raise ValueError(f"a thread is answered as settled, not {answer.state}")
        thread = await db.run(_open_thread, task_id, answer.kind, answer.root_id, job)
        if thread is None:
            continue
        await _reply_once(github, task, thread, answer, job)
        await db.run(_settle, task_id, answer, job, clock)
        answered += 1
    log.info("lifecycle: task %s: %s review threads answered", task_id, answered)
    return answered


async def _reply_once(
    github: GitHubApi, task: Task, thread: ReviewThread, answer: ThreadAnswer, job: str | None
) -> None:
    marker = answer_marker(answer.kind, answer.root_id, job)
    replies = await _app_replies(github, task.repo, thread.pr_number, {answer.kind})
    if any(marker in body for _, body in replies):
        return  # this run replied before a crash; a person's copy of the marker is no reply
    body = answer_body(answer, job)
    if answer.kind == ThreadKind.COMMENT:
        await github.reply_to_review_comment(task.repo, thread.pr_number, thread.root_id, body)
    else:
        await github.create_comment(task.repo, thread.pr_number, body)


def _open_thread(
    session: Session,
    task_id: int,
    kind: ThreadKind,
    root_id: int,
    job: str | None = None,
    *,
    locked: bool = False,
) -> ReviewThread | None:
    """The thread, while it is open (and held by `job`, when named); `locked`: held until
    this transaction ends, for a change that depends on it being so."""
    query = select(ReviewThread).where(
        ReviewThread.task_id == task_id,
        ReviewThread.kind == kind,
        ReviewThread.root_id == root_id,
        ReviewThread.state == ThreadState.OPEN,
    )
    if job is not None:
        query = query.where(ReviewThread.picked_job == job)
    return session.scalar(query.with_for_update() if locked else query)


def _settle(
    session: Session, task_id: int, answer: ThreadAnswer, job: str | None, clock: Clock
) -> None:
    # Locked: a writer's reply that reopens the thread for the next run (bot.lifecycle.
    # reviews) commits before this read, and the thread is not settled, or after it.
    thread = _open_thread(session, task_id, answer.kind, answer.root_id, job, locked=True)
    if thread is None:
        return
    thread.state = answer.state
    thread.commit = answer.commit if answer.state == ThreadState.ADDRESSED else None
    thread.reason = None if answer.state == ThreadState.ADDRESSED else answer_text(answer)
    thread.updated_at = clock()


async def settle_replied(
    db: Database, github: GitHubApi, task: Task, *, clock: Clock = utcnow
) -> list[ThreadAnswer]:
    """Settle the open threads an earlier run took up and replied on, but whose worker died
    before it settled their rows, as its replies (the App's own, with that run's marker)
    say; those answers. A thread that run did not reply on stays open, for the caller to
    take up."""
    held = await db.run(_held_open, task.id)
    if not held or task.pr_number is None:
        return []
    replies = await _app_replies(github, task.repo, task.pr_number, {t.kind for t in held})
    settled = []
    for thread in held:
        job, kind = str(thread.picked_job), ThreadKind(thread.kind)
        said = (read_answer(kind, thread.root_id, job, body) for of, body in replies if of == kind)
        answer = next((found for found in said if found is not None), None)
        if answer is not None:
            await db.run(_settle, task.id, answer, job, clock)
            settled.append(answer)
    if settled:
        log.info("lifecycle: task %s: %s threads settled from replies", task.id, len(settled))
    return settled


async def _app_replies(
    github: GitHubApi, repo: str, number: int, kinds: set[str]
) -> list[tuple[ThreadKind, str]]:
    """The App's thread answers on the pull request: (kind, body), for the kinds asked."""
    written: list[tuple[ThreadKind, str, str]] = []  # (kind, author, body)
    if ThreadKind.COMMENT in kinds:
        for comment in await github.list_review_comments(repo, number):
            author = comment.user.login if comment.user else ""
            written.append((ThreadKind.COMMENT, author, comment.body))
    if ThreadKind.REVIEW in kinds:
        for issue_comment in await github.list_comments(repo, number):
            written.append((ThreadKind.REVIEW, issue_comment.author, issue_comment.body))
    return [
        (kind, body)
        for kind, author, body in written
        if body.startswith(ANSWER_PREFIX) and await github.is_app_login(author)
    ]


def _held_open(session: Session, task_id: int) -> list[ReviewThread]:
    """Open threads a run took up (and has not settled): a run's retry finds here what the
    run it retries left."""
    query = select(ReviewThread).where(
        ReviewThread.task_id == task_id,
        ReviewThread.state == ThreadState.OPEN,
        ReviewThread.picked_job.is_not(None),
    )
    threads = list(session.scalars(query.order_by(ReviewThread.id)))
    for thread in threads:
        session.expunge(thread)
    return threads


def let_go(session: Session, task_id: int) -> None:
    """The open threads a run held, let go: its task's pull request was merged or closed
    under it, so that run answers none of them (it replies only on threads it still holds)
    and, once the pull request is reopened, the next review run takes them up."""
    session.execute(
        update(ReviewThread)
        .where(
            ReviewThread.task_id == task_id,
            ReviewThread.state == ThreadState.OPEN,
            ReviewThread.picked_job.is_not(None),
        )
        .values(picked_job=None, picked_at=None)
        .execution_options(synchronize_session=False)
    )
