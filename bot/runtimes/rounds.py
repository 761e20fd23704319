"""The tool-round loop every model runtime shares: ask the model, stream what it says, and
while it asks for tools (and the turn has rounds left) run them and ask again.

What differs per provider is behind `Conversation`: how one round is requested and read,
and how the model's tool calls and their results join the messages. The rules live here
once: the last round offers no tools; a model that still calls tools after it has answered
gets a status line and the answer stands; one that never answered is an upstream failure;
and a failure after content was streamed is reported as such (no fallback route then).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import aiohttp
import msgspec

from bot.runtimes.base import Delta, Route, RuntimeEvent, RuntimeRequest, Status, Usage
from bot.runtimes.budget import Fitted, fit_request
from bot.runtimes.tools import (
    RepoTools,
    ToolCall,
    ToolResult,
    repo_tools,
    status_text,
    tools_available,
)
from bot.runtimes.transport import (
    Endpoint,
    UpstreamFailure,
    client_session,
    failure_from_exception,
    failure_from_response,
)

log = logging.getLogger(__name__)

M = TypeVar("M")  # a provider's message type (a wire Struct of bot.runtimes.*_wire)
S = TypeVar("S")  # what reading one round leaves (a provider's state of that round)


@dataclass(frozen=True)
class RoundOutcome:
    """What one finished round left: its reply text, the tools it asked for (none: it
    answered), and the tokens it used if the provider said."""

    text: str
    calls: list[ToolCall]
    usage: Usage | None


class Conversation(Protocol):
    def round(self, *, final: bool) -> AsyncGenerator[RuntimeEvent, None]:
        """Stream one round; `final`: offer no tools (or forbid their use)."""
        ...

    def outcome(self, round_number: int) -> RoundOutcome:
        """The round just streamed (`round_number` counts from 1)."""
        ...

    def record(self, outcome: RoundOutcome, results: list[ToolResult]) -> None:
        """Add the model's tool calls and their results to the messages."""
        ...


class ModelWire(Protocol[M, S]):
    """A hosted-model runtime as `stream_turn` uses it: where it sends, and its wire."""

    model: str
    endpoint: Endpoint
    context_tokens: int
    thinking_tokens: int
    tool_rounds: int
    where: str
    http: aiohttp.ClientSession | None

    def messages(self, request: RuntimeRequest, fitted: Fitted) -> list[M]:
        """The fitted history in the provider's message format."""
        ...

    def conversation(self, turn: WireTurn[M, S]) -> Conversation: ...

    def start_round(
        self, turn: WireTurn[M, S], state: S, *, final: bool
    ) -> AsyncGenerator[RuntimeEvent, None]: ...


@dataclass(frozen=True)
class WireTurn(Generic[M, S]):
    """What a runtime's conversation works with: its wire (request bodies, reading a round),
    the HTTP session, the request, the turn's tools and the messages so far."""

    wire: ModelWire[M, S]
    http: aiohttp.ClientSession
    request: RuntimeRequest
    tools: RepoTools | None
    messages: list[M]


class WireConversation(Generic[M, S]):
    """A conversation whose every round is read into a fresh state (`new_state()`), kept
    in `state` for the provider's `outcome` and `record` of that round."""

    def __init__(self, turn: WireTurn[M, S], new_state: Callable[[], S]) -> None:
        self.turn = turn
        self._new_state = new_state
        self.state = new_state()

    def round(self, *, final: bool) -> AsyncGenerator[RuntimeEvent, None]:
        self.state = self._new_state()
        return self.turn.wire.start_round(self.turn, self.state, final=final)


class HostedRuntime(ABC, Generic[M, S]):
    """A hosted model as a runtime: a model at an endpoint, its context window, tool rounds
    and thinking budget; whole turns stream through `stream_turn`, each round through
    `streamed_round`. A provider's subclass gives its wire: `PATH`, `PROVIDER`, `headers`,
    `messages` (of its message type M), `conversation`, `body` and `read` (into its round
    state S)."""

    name: str
    PATH: ClassVar[str]  # where one round is POSTed, below the endpoint's base URL
    PROVIDER: ClassVar[str]  # how messages name the endpoint ("the Anthropic endpoint")

    def __init__(
        self,
        *,
        model: str,
        endpoint: Endpoint,
        context_tokens: int,
        tool_rounds: int = 4,
        thinking_tokens: int = 0,
        http: aiohttp.ClientSession | None = None,
    ) -> None:
        self.model = model
        self.http = http
        self.endpoint = endpoint
        self.context_tokens = context_tokens
        self.tool_rounds = tool_rounds
        self.thinking_tokens = thinking_tokens
        self.where = f"{self.PROVIDER} {endpoint.label} (model {model})"

    def stream(self, request: RuntimeRequest) -> AsyncGenerator[RuntimeEvent, None]:
        return stream_turn(self, request)

    def start_round(
        self, turn: WireTurn[M, S], state: S, *, final: bool
    ) -> AsyncGenerator[RuntimeEvent, None]:
        """One round of `turn` (`final`: no tools), its answer read into `state` (a fresh
        one per round, kept by the conversation for `outcome`)."""
        return streamed_round(
            self,
            turn.http,
            self.PATH,
            self.body(turn, final=final),
            self.headers(),
            lambda response: self.read(response, state),
        )

    @abstractmethod
    def body(self, turn: WireTurn[M, S], *, final: bool) -> msgspec.Struct:
        """The request body of one round of `turn` (a wire Struct, sent as JSON)."""
        ...

    @abstractmethod
    def read(
        self, response: aiohttp.ClientResponse, state: S
    ) -> AsyncGenerator[RuntimeEvent, None]:
        """Stream one round's answer as events, keeping what the round left in `state`."""
        ...

    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    @abstractmethod
    def messages(self, request: RuntimeRequest, fitted: Fitted) -> list[M]: ...

    @abstractmethod
    def conversation(self, turn: WireTurn[M, S]) -> Conversation: ...


async def stream_turn(
    wire: ModelWire[Any, Any], request: RuntimeRequest
) -> AsyncGenerator[RuntimeEvent, None]:
    """A whole turn: the route, the history fitted to the window (with room for tools when
    the turn has a checkout), then the tool rounds."""
    yield Route(model=wire.model, endpoint=wire.endpoint.label)
    use_tools = tools_available(request.checkout, wire.tool_rounds)
    fitted = fit_request(
        request,
        model=wire.model,
        window=wire.context_tokens,
        thinking_tokens=wire.thinking_tokens,
        tools=use_tools,
    )
    for event in fitted.events():
        yield event
    tools = (
        repo_tools(request.checkout, rounds=wire.tool_rounds, room_tokens=fitted.room)
        if use_tools
        else None
    )
    async with client_session(wire.http) as http:
        turn = WireTurn(wire, http, request, tools, wire.messages(request, fitted))
        conversation = wire.conversation(turn)
        rounds = tool_rounds(conversation, tools=tools, rounds=wire.tool_rounds, where=wire.where)
        async with aclosing(rounds) as events:
            async for event in events:
                yield event


async def streamed_round(
    wire: ModelWire[Any, Any],
    http: aiohttp.ClientSession,
    path: str,
    body: msgspec.Struct,
    headers: dict[str, str],
    read: Callable[[aiohttp.ClientResponse], AsyncGenerator[RuntimeEvent, None]],
) -> AsyncGenerator[RuntimeEvent, None]:
    """POST one round to the endpoint and stream what `read` makes of the answer; an error
    status or a network failure becomes an UpstreamFailure that names the endpoint (its
    secrets redacted)."""
    try:
        async with wire.endpoint.post(http, path, body, headers) as response:
            if response.status >= 400:
                raise await failure_from_response(
                    response, where=wire.where, secrets=wire.endpoint.secrets()
                )
            async with aclosing(read(response)) as events:
                async for event in events:
                    yield event
    except (aiohttp.ClientError, TimeoutError) as exc:
        failure = failure_from_exception(
            exc, where=wire.where, read_timeout=wire.endpoint.read_timeout
        )
        if failure is None:
            raise
        log.warning("model call failed: %s %s: %s", wire.model, wire.endpoint.label, exc)
        raise failure from None


async def tool_rounds(
    conversation: Conversation, *, tools: RepoTools | None, rounds: int, where: str
) -> AsyncGenerator[RuntimeEvent, None]:
    produced = False  # text, reasoning or a tool call: the route is pinned from then on
    answered = False  # reply text (not only reasoning) has been streamed
    for number in range(1, rounds + 2):
        final = tools is None or number > rounds
        try:
            async with aclosing(conversation.round(final=final)) as events:
                async for event in events:
                    produced = True
                    answered = answered or isinstance(event, Delta)
                    yield event
        except UpstreamFailure as exc:
            raise (exc.after_content() if produced else exc) from None
        outcome = conversation.outcome(number)
        if outcome.usage is not None:
            yield outcome.usage
        if not outcome.calls:
            return
        if tools is None or final:
            if answered:
                yield Status("the model asked for more tools than this turn allows")
                return
            limit = f"the limit of {rounds} rounds" if tools else "no tools"
            raise UpstreamFailure(
                f"{where} kept calling tools ({limit}) without answering", before_content=False
            )
        produced = True
        yield Status(status_text(number, rounds, outcome.calls))
        results = await tools.run(outcome.calls, last_round=number == rounds)
        conversation.record(outcome, results)
        if outcome.text and not outcome.text.endswith("\n"):
            yield Delta("\n\n")  # keep text from before and after the tools apart
