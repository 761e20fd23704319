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


def system_prompt(
    *,
    agent: AgentConfig,
    focus: int | None,
    grounding: Grounding,
    redraft_hint: str | None,
    issue_block: str = "",
) -> str:
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
            prompt_block=grounding.prompt_block,
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
