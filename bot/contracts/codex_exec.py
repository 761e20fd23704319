"""Codex CLI's `codex exec --json` lines (JSONL `ThreadEvent`s) as msgspec Structs (version
0.171.0; /work/shared/agents/coding-agents.md, section 2.3, with real transcripts in
tests/fakes/agents/bin/), read by bot/lifecycle/agents/codex.py.

Codex changed this format once already and adds to it often (`usage` gained
`cache_write_input_tokens` and `reasoning_output_tokens`; forks add `item.plan.delta` and
`plan` items): unknown keys, event types and item types are ignored (`TaggedDecoder` gives
None for them). Only what the parser acts on is declared, required where the SDK's types
say it is always sent; a line of a known type without it, or with another type of value, is
a `msgspec.ValidationError` naming the key. Events not read: `turn.started`,
`item.updated`; items not read: `reasoning`, `todo_list`. An item travels raw inside its
event and is decoded on its own by `ITEMS`, so an item type added later skips only itself.
"""

from __future__ import annotations

import msgspec

from bot.contracts.tagged_json import TaggedDecoder

# -- items (the `item` of item.started / item.completed) --------------------------------


class Item(msgspec.Struct, frozen=True, tag_field="type"):
    id: str  # item_0, item_1 ...: an item starts and completes under one id


class AgentMessage(Item, frozen=True, tag="agent_message"):
    text: str  # the last one is the run's final answer


class CommandExecution(Item, frozen=True, tag="command_execution"):
    pass  # command, aggregated_output, exit_code (null while running), status: not read


class FileUpdate(msgspec.Struct, frozen=True):
    path: str  # `kind` (add | delete | update) is not read


class FileChange(Item, frozen=True, tag="file_change"):
    changes: list[FileUpdate] = []


class McpToolCall(Item, frozen=True, tag="mcp_tool_call"):
    tool: str


class WebSearch(Item, frozen=True, tag="web_search"):
    pass


class ErrorItem(Item, frozen=True, tag="error"):
    message: str  # a warning ("Model metadata ... not found", a transport fallback): not fatal


ThreadItem = AgentMessage | CommandExecution | FileChange | McpToolCall | WebSearch | ErrorItem

# -- events (one line each) -------------------------------------------------------------


class ThreadStarted(msgspec.Struct, frozen=True, tag_field="type", tag="thread.started"):
    thread_id: str  # what `codex exec resume` takes; a resumed run repeats it


class ItemStarted(msgspec.Struct, frozen=True, tag_field="type", tag="item.started"):
    item: msgspec.Raw  # a ThreadItem, decoded by `ITEMS`


class ItemCompleted(msgspec.Struct, frozen=True, tag_field="type", tag="item.completed"):
    item: msgspec.Raw  # a ThreadItem, decoded by `ITEMS`


class TurnUsage(msgspec.Struct, frozen=True):
    """One turn's tokens (older builds send only the first three)."""

    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_output_tokens: int | None = None


class TurnCompleted(msgspec.Struct, frozen=True, tag_field="type", tag="turn.completed"):
    usage: TurnUsage | None = None


class TurnError(msgspec.Struct, frozen=True):
    message: str


class TurnFailed(msgspec.Struct, frozen=True, tag_field="type", tag="turn.failed"):
    error: TurnError  # the failure: the turn ended without an answer


class StreamError(msgspec.Struct, frozen=True, tag_field="type", tag="error"):
    # Not fatal by itself: 0.171 reports its reconnects ("Reconnecting... 2/5") this way.
    message: str


ThreadEvent = ThreadStarted | ItemStarted | ItemCompleted | TurnCompleted | TurnFailed | StreamError

EVENTS: TaggedDecoder[ThreadEvent] = TaggedDecoder(ThreadEvent)
ITEMS: TaggedDecoder[ThreadItem] = TaggedDecoder(ThreadItem)
