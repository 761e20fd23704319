"""The short-issue path typed in Chat: "discuss #15", "publish it", "what is #15 waiting for?".

Commands in the operator's own words, matched whole (a sentence that merely mentions
publishing is not one), so they work the same with any runtime, the offline one included:

- `discuss #N` focuses this session on issue N: the Discuss session, where a Decision is
  drafted with the issue and its comments in context (the turn reads them).
- `publish it` publishes the Decision drafted in this session on its issue, once per turn
  (the turn id is the publish key), and clears the draft.
- `what is #N waiting for?` shows the task's state and the question it asked.
- `what is left on #N?` (or "what's still open on #N", "what remains for #N") shows the
  task's pull request and its review thread ledger (bot.chat.pull_left).
- `forget #N`, `forget <key>` (`forget comment:4567`) or `forget that <words>` forgets
  from session memory everything about issue N, the chunk under the key, or the chunks
  that say those words (at most FORGET_AT_MOST of them, or nothing), and says which chunks
  it forgot (by provenance, never their text). Only the imperative forgets: a question
  ("should we forget #3?", "forget #3?") is answered like any other. A forget turn is left
  out of the session's summary (`is_forget`), which would otherwise say the words again.
  Chat's own records are forgotten with memory (bot.chat.forgotten): `forget that` takes
  the words out of the repository's chat sessions, the forget turn's own stored messages
  included; a forgotten `chat_summary` chunk takes its session's stored summary with it.

Only the operator's message is read: text from GitHub or a model never triggers a command.
A command naming an issue number no issue can have (`#0`, `#000`, past the issue columns'
range) is refused before its turn (`check_command`): a 400, as the `focus` field's own bound
is. Leading zeros are read as GitHub reads them: it links `#007` to #7 and "Fixes #007"
closes #7 (memory.analysis.closing_references reads them so too), so `discuss #007` is
`discuss #7`, and the reply says #7.
"""

from __future__ import annotations

import asyncio
import enum
import re
from dataclasses import dataclass
from typing import Any

from bot.chat.forgotten import (
    FORGET_MESSAGES_AT_MOST,
    ChangedSession,
    count_saying,
    forget_saying,
    forget_summaries,
)
from bot.chat.intents import IntentContext, IntentOutcome, IntentPolicy
from bot.chat.pull_left import what_is_left
from bot.chat.session_rows import UNSET
from bot.chat.task_reader import TaskReader
from bot.contracts.errors import ErrorDetail
from bot.db import Database
from bot.decisions import DecisionPublisher
from bot.dialogue.trailer import Intent
from bot.errors import BadRequest
from bot.params import MAX_ISSUE
from memory import Memory
from memory.chunks import Forgotten
from memory.errors import MemoryError_, TooBroad


class Command(enum.Enum):
    DISCUSS = "discuss"
    PUBLISH = "publish"
    WAITING_FOR = "waiting_for"
    LEFT = "left"
    FORGET = "forget"


@dataclass(frozen=True)
class OperatorCommand:
    command: Command
    issue: int | None = None
    key: str | None = None  # FORGET: a chunk's key
    words: str | None = None  # FORGET: the words the chunks to forget say


_END = r"\s*[.!?]*\s*$"
# "ok so what's still left to do on issue #12?": the opening courtesies, then the question.
_OPENING = r"^\s*(?:(?:ok(?:ay)?|so|and|now|then|hey|hi)\b[\s,]*)*"
_LEFT_WHAT = (
    r"what(?:'s|\s+is|\s+are)\s+(?:still\s+)?(?:left|open|outstanding|remaining|pending)"
    r"(?:\s+to\s+do)?|what\s+(?:still\s+)?remains(?:\s+to\s+(?:do|be\s+done))?"
)
_PATTERNS = (
    (
        Command.DISCUSS,
        re.compile(r"^\s*(?:let'?s\s+)?discuss\s+(?:issue\s+)?#([0-9]+)" + _END, re.I),
    ),
    (
        Command.PUBLISH,
        re.compile(
            r"^\s*(?:ok,?\s+|yes,?\s+)?publish(?:\s+(?:it|that|the\s+decision))?" + _END, re.I
        ),
    ),
    (
        Command.WAITING_FOR,
        re.compile(
            r"^\s*what(?:'s|\s+is)\s+(?:issue\s+)?#([0-9]+)\s+waiting\s+(?:for|on)" + _END, re.I
        ),
    ),
    (
        Command.LEFT,
        re.compile(
            _OPENING
            + r"(?:"
            + _LEFT_WHAT
            + r")\s+(?:on|for|in|with|of)\s+(?:issue\s+|task\s+|pr\s+|pull\s+request\s+)?#([0-9]+)"
            + _END,
            re.I,
        ),
    ),
)


# "forget ..." in the imperative, whole; never a question (no "?" at the end).
_FORGET = r"^\s*(?:please\s+)?forget\s+"
_DONE = r"\s*[.!]*\s*$"
_FORGET_ISSUE = re.compile(
    _FORGET
    + r"(?:everything\s+(?:about|on)\s+)?(?:issue\s+|pr\s+|pull\s+request\s+)?#([0-9]+)"
    + _DONE,
    re.I,
)
_FORGET_KEY = re.compile(
    _FORGET + r"(?:the\s+)?(?:chunk\s+|key\s+)?`?([a-z_]+:[^\s`]*[^\s`.!?])`?" + _DONE, re.I
)
_FORGET_WORDS = re.compile(_FORGET + r"that\s+(.+?)" + _DONE, re.I | re.S)
_QUOTES = "\"'\u201c\u201d\u2018\u2019`"
MIN_FORGET_CHARS = 8  # "forget that it is" must not take half of memory
FORGET_AT_MOST = 10  # chunks one "forget that ..." may take; more: say more of it


def parse_command(message: str) -> OperatorCommand | None:
    """The command the whole message is, or None (also for a command naming an issue
    number no issue can have: `check_command` refuses those before a turn sees them)."""
    found = _read(message)
    return found if isinstance(found, OperatorCommand) else None


def check_command(message: str) -> None:
    """BadRequest (field "message") if the message is a command naming an issue number no
    issue can have. Refused rather than answered as plain chat: the operator typed a
    command, and a reply that ignores it would hide the typo (`discuss #0`, a number pasted
    twice); "focus": 0 in the request is refused the same way."""
    found = _read(message)
    if isinstance(found, _NoSuchIssue):
        shown = found.digits if len(found.digits) <= 20 else found.digits[:20] + "..."
        raise BadRequest(
            f"message names #{shown}, which is not an issue number:"
            f" issue numbers run from 1 to {MAX_ISSUE}",
            detail=ErrorDetail(field="message"),
        )


@dataclass(frozen=True)
class _NoSuchIssue:
    """A command whose issue number is 0 or past MAX_ISSUE, as typed."""

    digits: str


def _read(message: str) -> OperatorCommand | _NoSuchIssue | None:
    message = message.replace("\u2019", "'")  # "what’s" as phones type it
    forget = _parse_forget(message)
    if forget is not None:
        return forget
    for command, pattern in _PATTERNS:
        found = pattern.match(message)
        if found:
            if not found.groups():
                return OperatorCommand(command)
            issue = _issue(found.group(1))
            if issue is None:
                return _NoSuchIssue(found.group(1))
            return OperatorCommand(command, issue)
    return None


def _issue(digits: str) -> int | None:
    """The issue number `digits` (ASCII) names, or None if no issue can have it: 0, or past
    the 32-bit issue columns (SQLite overflowed, PostgreSQL refused: a 500 mid-turn). The
    length is checked first: int() refuses more than 4,300 digits with an error."""
    significant = digits.lstrip("0")
    if not significant or len(significant) > len(str(MAX_ISSUE)):
        return None
    number = int(significant)
    return number if number <= MAX_ISSUE else None


def _parse_forget(message: str) -> OperatorCommand | _NoSuchIssue | None:
    found = _FORGET_ISSUE.match(message)
    if found:
        issue = _issue(found.group(1))
        if issue is None:
            return _NoSuchIssue(found.group(1))
        return OperatorCommand(Command.FORGET, issue=issue)
    found = _FORGET_KEY.match(message)
    if found:
        return OperatorCommand(Command.FORGET, key=found.group(1))
    found = _FORGET_WORDS.match(message)
    if found:
        words = " ".join(found.group(1).split()).strip(_QUOTES).strip()
        return OperatorCommand(Command.FORGET, words=words) if words else None
    return None


# Commands answered from Steelframe's own records (the task's state and question, the pull
# request's ledger, the publish result), appended after the draft: session memory has no
# part in the answer, so the draft neither lists nor weighs it (`answered_by_record`).
RECORD_ANSWERED = frozenset({Command.WAITING_FOR, Command.LEFT, Command.PUBLISH, Command.FORGET})


def answered_by_record(message: str) -> bool:
    found = parse_command(message)
    return found is not None and found.command in RECORD_ANSWERED


def is_forget(message: str) -> bool:
    """Whether the message is a "forget ..." command: its turn (the message and the reply,
    which name what was forgotten) is left out of the session's summary (bot.chat.summariser),
    so the words do not come back into memory through it."""
    found = parse_command(message)
    return found is not None and found.command is Command.FORGET


def command_focus(message: str, focus: Any) -> Any:
    """The focus a turn takes: `discuss #N` focuses the session on N (unless the request
    itself names a focus); anything else keeps the request's."""
    found = parse_command(message)
    if found is not None and found.command is Command.DISCUSS and focus is UNSET:
        return found.issue
    return focus


class OperatorCommands:
    """An intent policy that runs the operator's commands and hands anything else to
    `inner` (the filing policy). It reads tasks through `tasks` (bot.chat.task_reader),
    forgets through `memory` (None: "forget" says it cannot) and, in the chat sessions,
    through `db` (None: memory only)."""

    def __init__(
        self,
        inner: IntentPolicy,
        *,
        tasks: TaskReader,
        publisher: DecisionPublisher | None,
        memory: Memory | None = None,
        db: Database | None = None,
    ) -> None:
        self.inner = inner
        self.tasks = tasks
        self.publisher = publisher
        self.memory = memory
        self.db = db

    async def apply(self, ctx: IntentContext) -> IntentOutcome:
        found = parse_command(ctx.message)
        if found is None:
            return await self.inner.apply(ctx)
        if found.command is Command.DISCUSS:
            assert found.issue is not None
            return await self._discuss(ctx, found.issue)
        if found.command is Command.PUBLISH:
            return await self._publish(ctx)
        if found.command is Command.FORGET:
            return await self._forget(ctx, found)
        if found.command is Command.LEFT:
            assert found.issue is not None
            left = await self.tasks.left(ctx.agent.repo, found.issue)
            return _said(what_is_left(left, found.issue))
        assert found.issue is not None
        return await self._waiting_for(ctx, found.issue)

    async def _discuss(self, ctx: IntentContext, issue: int) -> IntentOutcome:
        """The session is focused on the issue (`command_focus`); say so, with the question
        its task asked, which is what the Decision answers."""
        task = await self.tasks.focused(ctx.agent.repo, issue)
        question = None if task is None else task.question
        asked = f"\nIts task asks: {question}" if question else ""
        return IntentOutcome(
            intent=Intent.ANSWER,
            reply_suffix=(
                f"\n\nDiscussing #{issue} in this session: ask about it, say "
                f'"draft a decision: ...", then "publish it".{asked}'
            ),
            notes=[f"the operator opened a Discuss session on #{issue}"],
        )

    async def _publish(self, ctx: IntentContext) -> IntentOutcome:
        body, issue = ctx.session.decision_body, ctx.session.decision_issue
        if not body or issue is None:
            return _said(
                "Nothing to publish: no Decision is drafted in this session. Say "
                '"discuss #N", then "draft a decision: ...".'
            )
        if self.publisher is None:
            return _said("Not published: the GitHub App is not configured.")
        published = await self.publisher.publish(
            ctx.agent.repo,
            issue,
            body,
            operator_id=ctx.operator_id,
            request_key=f"chat:{ctx.turn_id}",
        )
        return IntentOutcome(
            intent=Intent.ANSWER,
            decision=None,
            reply_suffix=f"\n\nPublished the Decision on #{issue}: {published.comment_url}",
            notes=[f"the operator published the drafted Decision on #{issue}"],
        )

    async def _waiting_for(self, ctx: IntentContext, issue: int) -> IntentOutcome:
        task = await self.tasks.focused(ctx.agent.repo, issue)
        if task is None:
            return _said(f"#{issue} has no task: label it to start one, or file it in Chat.")
        question, state = task.question, task.state
        if question:
            return _said(
                f"#{issue} is {state}, waiting for an answer to: {question}\n"
                f'Say "discuss #{issue}" to draft a Decision, then "publish it".'
            )
        return _said(f"#{issue} is {state}; it is not waiting for an answer.")

    async def _forget(self, ctx: IntentContext, found: OperatorCommand) -> IntentOutcome:
        """Forget what the operator named, in the agent's repository, and say which chunks."""
        if self.memory is None:
            return _said("Nothing forgotten: session memory is not available here.")
        memory, repo = self.memory, ctx.agent.repo
        if found.words is not None and len(found.words) < MIN_FORGET_CHARS:
            return _said(
                "Nothing forgotten: say more of what the memory says (or forget by key, "
                "`steelframe memory forget`)."
            )
        try:
            if found.words is not None:
                await self._refuse_too_many_messages(repo, found.words)
            if found.issue is not None:
                what = f"about #{found.issue}"
                forgotten = await asyncio.to_thread(memory.forget_issue, repo, found.issue)
            elif found.key is not None:
                what = f"under the key {found.key}"
                one = await asyncio.to_thread(memory.forget_key, found.key)
                forgotten = [] if one is None else [one]
            else:
                assert found.words is not None
                what = f'saying "{found.words}"'
                forgotten = await asyncio.to_thread(
                    memory.forget_saying, repo, found.words, at_most=FORGET_AT_MOST
                )
        except TooBroad as exc:
            return _said(f"Nothing forgotten: {exc.message}. Say more of it, or forget by key.")
        except MemoryError_ as exc:
            return _said(f"Nothing forgotten: session memory failed ({exc.message}).")
        in_chats, changed = await self._forget_in_chats(repo, found, forgotten)
        if not forgotten and not in_chats:
            said = f"Nothing in session memory {what} in {repo}: nothing forgotten."
        elif not forgotten:
            said = f"Nothing in session memory {what} in {repo}.\n{in_chats}"
        else:
            lines = "\n".join(f"- {chunk.provenance}" for chunk in forgotten)
            said = f"Forgotten from session memory ({what}):\n{lines}"
            said += f"\n{in_chats}" if in_chats else ""
        return IntentOutcome(
            intent=Intent.STATUS,
            reply_suffix=f"\n\n{said}",
            notes=[f"the operator had {len(forgotten)} chunk(s) {what} forgotten"],
            forgotten=found.words,  # the turn's own stored messages leave them out too
            forgotten_in=changed,  # their operators' clients read them again
        )

    async def _refuse_too_many_messages(self, repo: str, words: str) -> None:
        """TooBroad, before anything is forgotten, if more chat messages say the words than
        one forget may change."""
        if self.db is None:
            return
        said = await self.db.run(count_saying, repo, words)
        if said > FORGET_MESSAGES_AT_MOST:
            raise TooBroad(
                f"more than {FORGET_MESSAGES_AT_MOST} chat messages say that;"
                " nothing was forgotten",
                matched=said,
            )

    async def _forget_in_chats(
        self, repo: str, found: OperatorCommand, forgotten: list[Forgotten]
    ) -> tuple[str, list[ChangedSession]]:
        """Forget in the chat sessions what was forgotten from memory (bot.chat.forgotten),
        say what changed there ("": nothing), and which sessions words were taken out of."""
        if self.db is None:
            return "", []
        if found.words is not None:
            scrubbed = await self.db.run(forget_saying, repo, found.words)
            if not scrubbed.messages and not scrubbed.sessions:
                return "", []
            said = (
                f"Taken out of the chat history too: {scrubbed.messages} message(s),"
                f" {scrubbed.sessions} session(s)."
            )
            return said, scrubbed.changed
        cleared = await self.db.run(forget_summaries, [chunk.key for chunk in forgotten])
        if not cleared:
            return "", []
        said = f"Forgotten with them: the stored summary of {len(cleared)} chat session(s)."
        return said, cleared


def _said(text: str) -> IntentOutcome:
    return IntentOutcome(intent=Intent.STATUS, reply_suffix=f"\n\n{text}")
