"""Claude Code's `--output-format stream-json` lines as msgspec Structs (version 2.1.332;
/work/shared/agents/coding-agents.md, section 1.3, with real transcripts in
tests/fakes/agents/bin/). One definition for both readers: the coding preset's parser
(bot/lifecycle/agents/claude.py) and the chat `command` runtime (bot/runtimes/command.py).

Claude Code adds keys to every line type between releases (init and result gained more
than 20 across 2.x) and new line types and `system` subtypes (`rate_limit_event`,
`api_retry`, `task_*`, `hook_*` ...): unknown keys are ignored, and so are unknown types
and subtypes (`TaggedDecoder` gives None for them). Only the keys a reader acts on are
declared, required where the format always sends them (the official SDK's parser requires
`message.content`, `subtype`, `is_error`, `session_id` on init); a line of a known type
without them, or with another type of value, is a `msgspec.ValidationError` naming the key.
Lines not read at all: `user` (tool results: the agent's own bookkeeping), `rate_limit_event`.

A `system` line's kind is its `subtype`: the line decodes as `System` first, then as one of
`SystemEvent` (tagged on `subtype`). An `assistant` line carries its content blocks raw,
each decoded on its own by `BLOCKS`, so a block type added later (`server_tool_use`,
`advisor_tool_result` ...) skips only itself. A `stream_event` (only with
`--include-partial-messages`) wraps one raw Anthropic API streaming event, kept raw here:
the command runtime decodes it with the Messages API's own Structs.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from bot.contracts.tagged_json import TaggedDecoder

# -- content blocks of an assistant line (the Messages API's, one block per line) -------


class TextBlock(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class ThinkingBlock(msgspec.Struct, frozen=True, tag_field="type", tag="thinking"):
    thinking: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_use"):
    name: str  # the tool (`Bash`, `Write`, an MCP tool ...); its `input` is not read


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock

# -- lines ------------------------------------------------------------------------------


class AssistantMessage(msgspec.Struct, frozen=True):
    content: list[msgspec.Raw]  # ContentBlocks, decoded by `BLOCKS`


class Assistant(msgspec.Struct, frozen=True, tag_field="type", tag="assistant"):
    message: AssistantMessage
    # The model call's failure (`server_error`, `rate_limit`, `authentication_failed` ...)
    # on the synthetic message that precedes an error result.
    error: str | None = None


class System(msgspec.Struct, frozen=True, tag_field="type", tag="system"):
    subtype: str  # the line's kind: decoded again by `SYSTEM` for the subtypes read


class StreamEvent(msgspec.Struct, frozen=True, tag_field="type", tag="stream_event"):
    event: msgspec.Raw  # one Anthropic Messages API streaming event, as the API sent it


class PermissionDenial(msgspec.Struct, frozen=True):
    tool_name: str


class ResultUsage(msgspec.Struct, frozen=True):
    """Messages API usage summed over the run (plus keys of Claude Code's own, not read)."""

    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None


class Result(msgspec.Struct, frozen=True, tag_field="type", tag="result"):
    """The run's last line. Success is `is_error == false` (and exit 0): an API failure is
    `subtype: success` with `is_error: true`."""

    subtype: str  # success | error_max_turns | error_max_budget_usd | error_during_execution ...
    is_error: bool
    session_id: str | None = None
    result: str | None = None  # the final text; absent on the error subtypes
    terminal_reason: str | None = None  # completed | max_turns | api_error ...
    api_error_status: int | str | None = None
    usage: ResultUsage | None = None
    # The cost is `total_cost_usd`; builds before 1.0.22 named it `cost_usd` / `total_cost`.
    total_cost_usd: float | UnsetType | None = UNSET
    cost_usd: float | UnsetType | None = UNSET
    total_cost: float | UnsetType | None = UNSET
    permission_denials: list[PermissionDenial] = []

    def cost(self) -> float | None:
        """The run's cost under whichever name this build gave it (the first present)."""
        for named in (self.total_cost_usd, self.cost_usd, self.total_cost):
            if named is not UNSET:
                return named
        return None


Line = Assistant | System | StreamEvent | Result

# -- system subtypes --------------------------------------------------------------------


class Init(msgspec.Struct, frozen=True, tag_field="subtype", tag="init"):
    """The first line: the session a later `--resume` takes, and the model answering."""

    session_id: str
    model: str | None = None


class PermissionDenied(msgspec.Struct, frozen=True, tag_field="subtype", tag="permission_denied"):
    """A tool call the permission mode refused (in `-p` mode the run still ends `success`)."""

    tool_name: str


SystemEvent = Init | PermissionDenied

LINES: TaggedDecoder[Line] = TaggedDecoder(Line)
SYSTEM: TaggedDecoder[SystemEvent] = TaggedDecoder(SystemEvent)
BLOCKS: TaggedDecoder[ContentBlock] = TaggedDecoder(ContentBlock)
