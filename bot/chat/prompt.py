"""Prompt building from Jinja2 templates: the system prompt and the message list."""

from __future__ import annotations

from functools import cache

import msgspec
from jinja2 import Environment, PackageLoader, StrictUndefined

from bot.chat.blocks import untrusted
from bot.chat.grounding import Grounding
from bot.config import AgentConfig
from bot.contracts.chat import Message
from bot.runtimes.base import ChatMessage


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("bot.chat", "templates"),
        undefined=StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # plain-text prompts, not HTML
        # Templates ship with the package and never change while it runs: no stat of the
        # template file on every turn's render.
        auto_reload=False,
    )


RECORD_NOTE = (
    "The operator's message is a Steelframe command (a task's state, what is left on a pull"
    " request, or publishing the drafted Decision). Steelframe appends its answer from its"
    " records right after your reply: reply in one short line, and do not answer it yourself"
    " or say anything about session memory."
)


def system_prompt(
    *,
    agent: AgentConfig,
    focus: int | None,
    grounding: Grounding,
    redraft_hint: str | None,
    issue_block: str = "",
    answered_by_record: bool = False,
) -> str:
    """`answered_by_record`: the message is a command Steelframe answers from its records
    after the reply (bot.chat.operator_commands): the model is told so instead of being
    given session memory to weigh, which has no part in that answer."""
    return (
        _environment()
        .get_template("system.j2")
        .render(
            agent=agent,
            focus=focus,
            committed_block=grounding.committed_block,
            # The task as its JSON (the task JSON of docs/api.md), which system.j2 embeds.
            task=None if grounding.task is None else msgspec.to_builtins(grounding.task),
            issue_block=issue_block,
            prompt_block=RECORD_NOTE if answered_by_record else grounding.prompt_block,
            redraft_hint=redraft_hint,
        )
    )


def messages(history: list[Message], message: str) -> list[ChatMessage]:
    """Prior turns then the operator's message, unchanged (it is never rewritten). A task
    result a worker delivered into the session re-enters as untrusted data with its
    provenance, never as something Steelframe itself said."""
    prior = [
        ChatMessage(role="user" if turn.role == "user" else "assistant", content=_content(turn))
        for turn in history
    ]
    return [*prior, ChatMessage(role="user", content=message)]


def _content(turn: Message) -> str:
    meta = turn.meta or {}
    if meta.get("kind") != "task_result":
        return turn.content
    return untrusted(
        turn.content,
        source="task_result",
        task=meta.get("task_id"),
        issue=meta.get("issue"),
        state=meta.get("state"),
    )
