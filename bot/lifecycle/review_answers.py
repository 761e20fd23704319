"""What the coding agent says it did about each review thread, and the replies made of it.

The protocol (docs/lifecycle.md, "Review runs"): before it ends, the agent writes
`.steelframe/review-answers.json` in its working tree,

    {"threads": [{"thread": "comment:123", "status": "addressed", "text": "..."}]}

one entry per thread the prompt listed (`status`: addressed, declined or question; `text`:
what changed, why not, or the question). The worker reads it and removes it before
committing, so it never reaches the branch. The file is the hostile agent's words: decoded
by a strict Struct, read only when it is a plain file of at most MAX_ANSWERS_BYTES, and
an entry naming a thread this run was not given is dropped. Without a readable file every
thread gets the worker's own answer: addressed in the new commit when the run made one,
else `needs operator`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import msgspec

from bot.lifecycle.models import ReviewThread, ThreadKind, ThreadState
from bot.lifecycle.thread_answers import ThreadAnswer

log = logging.getLogger(__name__)
ANSWERS_FILE = ".steelframe/review-answers.json"
MAX_ANSWERS_BYTES = 256 * 1024
NOTHING_DONE = (
    "The coding agent changed nothing for this thread and said nothing about it; an operator "
    "decides how to go on (publish a Decision on the issue)."
)
CLAIMED_WITHOUT_CHANGE = "The coding agent said it addressed this, but it changed nothing"


class Verdict(StrEnum):
    ADDRESSED = "addressed"
    DECLINED = "declined"
    QUESTION = "question"


class AgentAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    thread: str  # "comment:<root id>" or "review:<review id>", as the prompt named it
    status: Verdict
    text: str = ""


class AnswersFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    threads: list[AgentAnswer]


@dataclass(frozen=True)
class Settled:
    """The replies to make, and the questions among them (the task then waits for a
    Decision)."""

    answers: list[ThreadAnswer]
    questions: list[str]


def thread_key(thread: ReviewThread) -> str:
    return f"{thread.kind}:{thread.root_id}"


def take_answers(tree: Path) -> AnswersFile | None:
    """The agent's answers file, removed from the tree; None when absent or unreadable."""
    path = tree / ANSWERS_FILE
    folder = path.parent
    if folder.is_symlink() or not folder.is_dir() or path.is_symlink() or not path.is_file():
        return None
    try:
        raw = path.read_bytes()[: MAX_ANSWERS_BYTES + 1]
        path.unlink()
    except OSError:
        return None
    if len(raw) > MAX_ANSWERS_BYTES:
        log.info("lifecycle: review answers file over %s bytes: not read", MAX_ANSWERS_BYTES)
        return None
    try:
        return msgspec.json.decode(raw, type=AnswersFile)
    except msgspec.DecodeError as exc:
        log.info("lifecycle: review answers file not understood: %s", exc)
        return None


def settle(
    threads: Sequence[ReviewThread],
    given: AnswersFile | None,
    commit: str | None,
    public: Callable[[str], str],
) -> Settled:
    """One answer per thread of the run. `commit`: the run's new head, None when it pushed
    nothing; `public` redacts the agent's text for GitHub (`Run.public_block`)."""
    said = {answer.thread: answer for answer in given.threads} if given else {}
    answers: list[ThreadAnswer] = []
    questions: list[str] = []
    for thread in threads:
        kind, root = ThreadKind(thread.kind), thread.root_id
        answer = said.get(thread_key(thread))
        text = public(answer.text) if answer else ""
        if answer is None or (answer.status == Verdict.ADDRESSED and commit is None):
            if commit is not None:
                answers.append(ThreadAnswer(kind, root, ThreadState.ADDRESSED, "", commit))
                continue
            why = f"{CLAIMED_WITHOUT_CHANGE}: {text}" if answer and text else NOTHING_DONE
            answers.append(ThreadAnswer(kind, root, ThreadState.NEEDS_OPERATOR, why))
        elif answer.status == Verdict.ADDRESSED:
            answers.append(ThreadAnswer(kind, root, ThreadState.ADDRESSED, text, commit))
        elif answer.status == Verdict.DECLINED:
            reason = text or "The coding agent declined this without a reason."
            answers.append(ThreadAnswer(kind, root, ThreadState.DECLINED, reason))
        else:
            question = text or "The coding agent has a question about this thread."
            answers.append(ThreadAnswer(kind, root, ThreadState.NEEDS_OPERATOR, question))
            # The question a block of its own after the label: defanged, it is closed
            # (`public_text.defang`), which text put before it on its first line could undo.
            label = f"On {thread_key(thread)} ({thread.url or 'review'}):"
            questions.append(f"{label}\n\n{question}")
    return Settled(answers, questions)
