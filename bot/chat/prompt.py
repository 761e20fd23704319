"""Prompt building from Jinja2 templates: the system prompt and the message list."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from bot.chat.grounding import Grounding
from bot.config import AgentConfig
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
    )


def system_prompt(
    *, agent: AgentConfig, focus: int | None, grounding: Grounding, redraft_hint: str | None
) -> str:
    return (
        _environment()
        .get_template("system.j2")
        .render(
            agent=agent,
            focus=focus,
            committed_block=grounding.committed_block,
            task=grounding.task,
            prompt_block=grounding.prompt_block,
            redraft_hint=redraft_hint,
        )
    )


def messages(history: list[dict[str, Any]], message: str) -> list[ChatMessage]:
    """Prior turns then the operator's message, unchanged (it is never rewritten)."""
    prior = [
        ChatMessage(role="user" if turn["role"] == "user" else "assistant", content=turn["content"])
        for turn in history
    ]
    return [*prior, ChatMessage(role="user", content=message)]
