"""The command runtime: a coding CLI run in the agent's checkout, one process per model call.

Protocol (docs/runtimes.md has the full text): Steelframe writes one JSON object, the
request, to the command's stdin and closes it; the command writes JSON Lines to stdout:
`{"type": "thinking"|"delta"|"status", "text"}`, `{"type": "usage", "input_tokens",
"output_tokens"}`, `{"type": "route", "model"}`, `{"type": "error", "message"}`,
`{"type": "done"}`. Both are the Structs of bot/runtimes/command_wire.py. Claude Code's
`--output-format stream-json` lines (`system`, `assistant`, `stream_event`, `result`) are
understood too, decoded with the Structs the coding preset reads them with
(bot/contracts/claude_code.py; a `stream_event`'s API event with the Messages API's,
bot/runtimes/anthropic_wire.py). A line of a type either dialect has, in a shape it does not
have, fails the turn, naming the key (never the value); a JSON object of another type (or
none) is ignored, and a line that is not a JSON object is reply text. Exit status 0 ends
the answer; anything else is an error with stderr's tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import msgspec

from bot.contracts import claude_code
from bot.runtimes import command_wire
from bot.runtimes.anthropic_wire import (
    DELTAS,
    EVENTS,
    ContentBlockDelta,
    MessageDelta,
    TextDelta,
    ThinkingDelta,
)
from bot.runtimes.base import (
    Delta,
    Route,
    RuntimeEvent,
    RuntimeRequest,
    Status,
    Thinking,
    Usage,
)
from bot.runtimes.budget import fit_request
from bot.runtimes.command_wire import PROTOCOL, ChatRequest, RequestMessage
from bot.runtimes.transport import UpstreamFailure, clip, malformed_frame, redact

log = logging.getLogger(__name__)
LINE_LIMIT = 1 << 20
STDERR_TAIL_BYTES = 4096
TERMINATE_GRACE_SECONDS = 2.0
# The child needs the model credentials a coding CLI uses, but never the App's own secrets
# or the service's database and broker URLs.
SCRUBBED_ENV = frozenset(
    {
        "PRIVATE_KEY",
        "PRIVATE_KEY_PATH",
        "WEBHOOK_SECRET",
        "STEELFRAME_DATABASE_URL",
        "STEELFRAME_REDIS_URL",
    }
)


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in environ.items() if key not in SCRUBBED_ENV}


class CommandRuntime:
    name = "command"

    def __init__(
        self,
        *,
        command: str,
        model: str | None,
        context_tokens: int,
        read_timeout: float = 120.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("the chat command is empty")
        self.program = Path(self.argv[0]).name
        self.model = model or self.program
        self.context_tokens = context_tokens
        self.read_timeout = read_timeout
        self.environ = environ
        self.endpoint = f"command:{self.program}"
        self.where = f"the chat command {self.program!r}"

    async def stream(self, request: RuntimeRequest) -> AsyncIterator[RuntimeEvent]:
        yield Route(model=self.model, endpoint=self.endpoint)
        fitted = fit_request(request, model=self.model, window=self.context_tokens, tools=False)
        for event in fitted.events():
            yield event
        payload = ChatRequest(
            model=self.model,
            system=request.system,
            messages=[RequestMessage(m.role, m.content) for m in fitted.messages],
            max_output_tokens=request.max_output_tokens,
            checkout=str(request.checkout.resolve()),
        )
        process = await self._spawn(request.checkout)
        stderr_tail: deque[bytes] = deque(maxlen=64)
        feeder = asyncio.create_task(_feed(process, payload.line()))
        drainer = asyncio.create_task(_drain(process.stderr, stderr_tail))
        mapper = _LineMapper(self.endpoint, self.where)
        produced = False
        try:
            assert process.stdout is not None
            while True:
                line = await self._next_line(process.stdout, produced)
                if line is None:
                    break
                for item in mapper.map(line):
                    if isinstance(item, UpstreamFailure):
                        raise item.after_content() if produced else item
                    if isinstance(item, Thinking | Delta):
                        produced = True
                    yield item
                if mapper.done:
                    break
            code = await self._exit_code(process, done=mapper.done)
            await asyncio.wait({drainer}, timeout=TERMINATE_GRACE_SECONDS)
            if code != 0:
                raise self._exit_failure(code, stderr_tail, produced)
            if not produced:
                raise UpstreamFailure(f"{self.where} exited without an answer")
        finally:
            feeder.cancel()
            drainer.cancel()
            await _stop(process)

    async def _spawn(self, checkout: Path) -> asyncio.subprocess.Process:
        if not await asyncio.to_thread(checkout.is_dir):
            raise UpstreamFailure(f"the agent's checkout {checkout} is not a directory")
        environ = self.environ if self.environ is not None else os.environ
        try:
            return await asyncio.create_subprocess_exec(
                *self.argv,
                cwd=checkout,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=child_environment(environ),
                limit=LINE_LIMIT,
                start_new_session=True,  # its own process group, so stop ends its children too
            )
        except FileNotFoundError:
            raise UpstreamFailure(f"{self.where} was not found (STEELFRAME_CHAT_COMMAND)") from None
        except PermissionError:
            raise UpstreamFailure(
                f"{self.where} is not executable (STEELFRAME_CHAT_COMMAND)"
            ) from None

    async def _exit_code(self, process: asyncio.subprocess.Process, *, done: bool) -> int:
        """The exit status; a command that said `done` but lingers counts as finished."""
        try:
            return await asyncio.wait_for(
                process.wait(), TERMINATE_GRACE_SECONDS if done else self.read_timeout
            )
        except TimeoutError:
            if done:
                return 0  # `_stop` ends it
            raise UpstreamFailure(
                f"{self.where} closed its output but did not exit", before_content=False
            ) from None

    async def _next_line(self, stdout: asyncio.StreamReader, produced: bool) -> bytes | None:
        try:
            async with asyncio.timeout(self.read_timeout):
                line = await stdout.readline()
        except TimeoutError:
            failure = UpstreamFailure(
                f"{self.where} printed nothing for {self.read_timeout:g} s (timed out)",
                retryable=True,
            )
            raise (failure.after_content() if produced else failure) from None
        except ValueError:  # a line over LINE_LIMIT
            raise UpstreamFailure(
                f"{self.where} printed a line longer than {LINE_LIMIT} bytes",
                before_content=not produced,
            ) from None
        return line or None

    def _exit_failure(self, code: int, tail: deque[bytes], produced: bool) -> UpstreamFailure:
        text = b"".join(tail).decode("utf-8", errors="replace").strip().splitlines()
        last = clip(redact(" ".join(text[-3:]))) if text else "no error output"
        reason = f"signal {-code}" if code < 0 else f"status {code}"
        log.warning("chat command %s exited with %s", self.program, reason)
        return UpstreamFailure(
            f"{self.where} exited with {reason}: {last}", before_content=not produced
        )


class _LineMapper:
    """One stdout line to runtime events (or a failure), in either dialect."""

    def __init__(self, endpoint: str, where: str) -> None:
        self.endpoint = endpoint
        self.where = where
        self.done = False
        self._partial = False  # Claude Code stream_event deltas seen: skip its whole messages

    def map(self, raw: bytes) -> list[RuntimeEvent | UpstreamFailure]:
        text = raw.decode("utf-8", errors="replace")
        try:
            kind = command_wire.LINE_TYPE.decode(text).type
        except msgspec.DecodeError:  # not JSON (NaN included), or not an object
            return [Delta(text)] if text else []
        if not isinstance(kind, str):
            return []  # an object without a (string) type: ignored, as the protocol says
        if kind in command_wire.LINES.tags:
            dialect, read = f"{PROTOCOL} line", self._own
        elif kind in claude_code.LINES.tags:
            dialect, read = "Claude Code line", self._claude_code
        else:
            return []  # a type neither dialect has: ignored, as the protocol says
        try:
            return read(text)
        except msgspec.ValidationError as exc:  # a key missing, null or of another type
            return [malformed_frame(self.where, exc, frame=dialect)]

    def _own(self, text: str) -> list[RuntimeEvent | UpstreamFailure]:
        """A `steelframe.chat.v1` line (its type is one of the protocol's)."""
        line = command_wire.LINES.decode(text)
        if isinstance(line, command_wire.ThinkingLine):
            return [Thinking(line.text)] if line.text else []
        if isinstance(line, command_wire.DeltaLine):
            return [Delta(line.text)] if line.text else []
        if isinstance(line, command_wire.StatusLine):
            return [Status(line.text)] if line.text else []
        if isinstance(line, command_wire.UsageLine):
            return [Usage(input_tokens=line.input_tokens, output_tokens=line.output_tokens)]
        if isinstance(line, command_wire.RouteLine):
            return [Route(model=line.model, endpoint=self.endpoint)]
        if isinstance(line, command_wire.ErrorLine):
            return [_reported(line.message)]
        if isinstance(line, command_wire.DoneLine):
            self.done = True
        return []

    def _claude_code(self, text: str) -> list[RuntimeEvent | UpstreamFailure]:
        """A Claude Code stream-json line (any other type is ignored)."""
        line = claude_code.LINES.decode(text)
        if isinstance(line, claude_code.StreamEvent):
            return self._partial_event(line.event)
        if isinstance(line, claude_code.Assistant):
            return self._assistant(line.message)
        if isinstance(line, claude_code.Result):
            if line.is_error:
                return [_reported(line.result)]
            usage = line.usage or claude_code.ResultUsage()
            self.done = True
            return [
                Usage(input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0)
            ]
        if isinstance(line, claude_code.System):
            init = claude_code.SYSTEM.decode(text)
            if isinstance(init, claude_code.Init) and init.model is not None:
                return [Route(model=init.model, endpoint=self.endpoint)]
        return []

    def _partial_event(self, raw: msgspec.Raw) -> list[RuntimeEvent | UpstreamFailure]:
        """A streamed API event (`--include-partial-messages`): once one carries a delta, the
        whole `assistant` messages that follow repeat what the deltas said."""
        event = EVENTS.decode(raw, at="$.event")
        if isinstance(event, ContentBlockDelta | MessageDelta):
            self._partial = True
        if not isinstance(event, ContentBlockDelta):
            return []
        delta = DELTAS.decode(event.delta, at="$.event.delta")
        if isinstance(delta, TextDelta) and delta.text:
            return [Delta(delta.text)]
        if isinstance(delta, ThinkingDelta) and delta.thinking:
            return [Thinking(delta.thinking)]
        return []

    def _assistant(
        self, message: claude_code.AssistantMessage
    ) -> list[RuntimeEvent | UpstreamFailure]:
        events: list[RuntimeEvent | UpstreamFailure] = []
        for index, raw in enumerate(message.content):
            block = claude_code.BLOCKS.decode(raw, at=f"$.message.content[{index}]")
            if isinstance(block, claude_code.ToolUseBlock):
                events.append(Status(f"tool · {block.name}"))
            elif not self._partial and isinstance(block, claude_code.TextBlock) and block.text:
                events.append(Delta(block.text))
            elif not self._partial and isinstance(block, claude_code.ThinkingBlock):
                if block.thinking:
                    events.append(Thinking(block.thinking))
        return events


def _reported(message: str | None) -> UpstreamFailure:
    return UpstreamFailure(f"the chat command reported: {clip(redact(message or 'an error'))}")


async def _feed(process: asyncio.subprocess.Process, payload: bytes) -> None:
    """Write the request and close stdin; a command that does not read it is its business."""
    assert process.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.write(payload)
        await process.stdin.drain()
        process.stdin.close()
        await process.stdin.wait_closed()


async def _drain(stream: asyncio.StreamReader | None, tail: deque[bytes]) -> None:
    """Read stderr as it comes (a full pipe would stall the command), keeping the end."""
    if stream is None:
        return
    while chunk := await stream.read(1024):
        tail.append(chunk)
        while sum(map(len, tail)) > STDERR_TAIL_BYTES and len(tail) > 1:
            tail.popleft()


async def _stop(process: asyncio.subprocess.Process) -> None:
    """End the command and its process group if it still runs (stop, error, timeout)."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), TERMINATE_GRACE_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
