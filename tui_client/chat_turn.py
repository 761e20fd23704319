"""One turn of the chat: the message sent, its stream of frames rendered into the reply as
they arrive (Structs of tui_client/sessions_wire.py, decoded by tui_client/turn_frames.py),
its end, and stopping it (esc).

One turn at a time: `busy` is set by the Enter that starts it and cleared when its worker
has shown all of the reply; a message, a new chat or a reopen in between is refused.
"""

from __future__ import annotations

import asyncio
import logging

from textual.css.query import NoMatches
from textual.widget import MountError

from tui_client import wire
from tui_client.api import KEEP, ApiError, Keep
from tui_client.chat_part import ChatPart
from tui_client.failures import TRANSPORT_ERRORS, describe, offline_reason
from tui_client.reply import FinishedReply
from tui_client.sessions_wire import (
    DeltaFrame,
    DoneFrame,
    ErrorFrame,
    Frame,
    StatusFrame,
    ThinkingFrame,
)
from tui_client.transcript import AssistantMessage, UserMessage
from tui_client.turn_frames import Unreadable

log = logging.getLogger(__name__)
STOPPED_TEXT = "Stopped. Nothing of this turn was saved; the next message starts fresh."
NOT_SENT = "Not sent: your message is back in the composer (enter sends it again)."
# Refused as it is (too long, malformed): sent again it would be refused again.
NOT_TAKEN = "Not sent: your message is back in the composer, to change it."
REFUSED_AS_IS = frozenset({400, 413, 422})
# A stop answered "nothing in flight" while this turn's stream is open crossed the turn's
# start on the service: asked again, this many times, a pause growing to STOP_PAUSE_MAX
# between (some 15 s in all, as the web GUI: a loaded service may take seconds).
STOP_ATTEMPTS = 12
STOP_PAUSE_MAX = 1.5


class TurnStream(ChatPart):
    # Whether the service has the turn (a frame of it came), and whether esc was pressed
    # before it had: the stop is sent once it has (sent before, it would stop nothing).
    _started = False
    _stop_wanted = False
    # esc was pressed: the status line says so (or that it came too late) until the turn
    # ends, whatever phase the frames still arriving name.
    _stopping = False

    async def submit(self, text: str) -> None:
        """Enter in the composer: a turn, unless one runs; held while a chat opens."""
        if not text.strip():
            return
        if await self.panel.refuse_while_busy():
            return
        if self.state.switching:
            await self.panel.switch.hold(text)
            return
        self.composer.value = ""
        self.start(text)

    def start(self, text: str) -> None:
        """Busy from the key press on, not from when the worker starts: a ctrl+n or a
        second Enter right after it is refused, not raced against the turn."""
        self.state.busy, self.state.phase = True, "sending"
        self._started = self._stop_wanted = self._stopping = False
        self.panel.refresh_status()
        self.run("turn", self._send, text)

    async def _send(self, text: str) -> None:
        state = self.state
        state.busy, state.phase = True, "sending"
        self.panel.refresh_status()
        reply = AssistantMessage()
        await self.transcript.mount_all([UserMessage(text), reply])
        focus, state.focus_change = state.focus_change, KEEP
        session_id, key = state.session_id, state.send_key(text)
        taken = False  # a frame of the turn arrived: the service has the message
        try:
            turn = self.client.turn(text, session_id=session_id, focus=focus, key=key)
            async for numbered in turn:
                taken = True
                self._has_started()
                await self._apply(numbered.frame, reply)
        except TRANSPORT_ERRORS as exc:
            if (reason := offline_reason(exc)) is not None:
                state.offline = reason
            if taken:
                await reply.fail(describe(exc))
            else:
                self._give_back(text, focus)
                state.unsent = (text, session_id, key)  # sent again, it is the same message
                as_is = isinstance(exc, ApiError) and exc.status in REFUSED_AS_IS
                await reply.fail(f"{describe(exc)} {NOT_TAKEN if as_is else NOT_SENT}")
        except (NoMatches, MountError):
            raise  # the panel is gone (see failures.unless_unmounted)
        except Exception as exc:  # the app keeps running whatever a turn does
            log.exception("turn failed in the client")
            await reply.fail(f"Unexpected error: {type(exc).__name__}: {exc}")
        finally:
            state.busy, state.phase = False, ""
            self.panel.refresh_status()
            self.panel.listing.turn_ended()

    def attach(self, session_id: str) -> None:
        """The open chat has a turn still running on the service (sent by another client,
        before this TUI started, or its stream lost with the connection): shown as it
        streams, from its first frame (which carries the operator's message, docs/api.md),
        and stoppable with esc; busy meanwhile, as a turn sent here is (the service would
        refuse another message with a 409 until it ends)."""
        self.state.busy, self.state.phase = True, "re-attaching"
        self._started, self._stop_wanted, self._stopping = True, False, False
        self.panel.refresh_status()
        self.run("turn", self._attach, session_id)

    async def _attach(self, session_id: str) -> None:
        reply = AssistantMessage()
        await self.transcript.mount(reply)
        try:
            async for numbered in self.client.resume(session_id):
                frame = numbered.frame
                if isinstance(frame, StatusFrame) and frame.message and not self._asked(reply):
                    await self.transcript.mount(UserMessage(frame.message), before=reply)
                await self._apply(frame, reply)
            if reply.streaming:  # the stream ended without its terminal frame
                await reply.fail("The connection ended before the turn did: ctrl+r shows it.")
        except TRANSPORT_ERRORS as exc:
            if (reason := offline_reason(exc)) is not None:
                self.state.offline = reason
            await reply.fail(describe(exc))
        finally:
            self.state.busy, self.state.phase = False, ""
            self.panel.refresh_status()
            self.panel.listing.turn_ended()

    def _asked(self, reply: AssistantMessage) -> bool:
        """The operator's message is already shown above `reply`."""
        children = self.transcript.children
        index = children.index(reply)
        return index > 0 and isinstance(children[index - 1], UserMessage)

    def _give_back(self, text: str, focus: int | Keep | None) -> None:
        """The service never took the message (unreachable, or the turn refused before its
        first frame: the service's first frame names the session, so none means no turn):
        back in the composer, ahead of anything typed since, with the focus change it was to
        carry unless another was chosen meanwhile. Enter sends it again (the web GUI puts
        an unsent message back in its input too)."""
        self.composer.put_back(text)
        if self.state.focus_change is KEEP:
            self.state.focus_change = focus

    async def _apply(self, frame: Frame | Unreadable, reply: AssistantMessage) -> None:
        state = self.state
        match frame:
            # Frames of the turn could not be relayed (docs/api.md): what streamed may have
            # skipped a part, so it stays under the reply as a warning rather than passing in
            # the status line.
            case StatusFrame() if frame.reason == wire.StatusReason.FRAMES_LOST:
                await reply.warn(frame.text, kind="warning")
            case StatusFrame():
                self._phase(frame.text or state.phase)
                if frame.session:
                    state.session_id = frame.session
            case ThinkingFrame():
                self._phase("thinking")
                await reply.add_thinking(frame.text)
            case DeltaFrame():
                self._phase("grounded re-draft" if frame.draft > 1 else "replying")
                await reply.add_delta(frame.text, replace=frame.replace)
            case DoneFrame():
                state.offline = None
                state.finish_turn(frame.response)
                await reply.finish(FinishedReply.of(frame.response), decision=state.decision)
                self.panel.listing.load()  # a first message titles the session
            case ErrorFrame():
                stopped = frame.reason == wire.ErrorReason.STOPPED
                await reply.fail(
                    STOPPED_TEXT if stopped else f"Turn failed: {frame.error}",
                    kind="stopped" if stopped else "error",
                )
            case Unreadable():
                # The service and this TUI disagree on a frame: said in the reply, not raised.
                # A `done` or `error` frame ends the turn, so the reply ends failed; any other
                # is one step of the reply, which streams on to the turn's end (reading on
                # also leaves the service's turn to finish, not in flight with no reader).
                if frame.type in wire.TERMINAL_FRAMES:
                    await reply.fail(frame.text)
                else:
                    await reply.warn(frame.text)
        self.panel.refresh_status()

    def stop(self) -> None:
        """esc: stop the turn on the service; before the service has it, once it has."""
        if self.state.busy:
            self._stopping = True
            self.state.phase = "stopping"
            self.panel.refresh_status()
            if self._started:
                self.run("stop", self._stop)
            else:
                self._stop_wanted = True

    def _phase(self, text: str) -> None:
        """The turn's phase from its frames; not once esc was pressed (see `_stopping`)."""
        if not self._stopping:
            self.state.phase = text

    def _has_started(self) -> None:
        """A frame of the turn came: the service has it, and a stop wanted meanwhile goes."""
        if not self._started:
            self._started = True
            if self._stop_wanted:
                self.run("stop", self._stop)

    async def _stop(self) -> None:
        for attempt in range(STOP_ATTEMPTS):
            try:
                result = await self.client.stop()
            except TRANSPORT_ERRORS as exc:
                # The service cannot be told; at least stop listening here.
                self.panel.workers.cancel_group(self.panel, "turn")
                await self.panel.report(exc)
                return
            if result.reason == "finishing":  # the model had answered: the turn is kept
                self.state.phase = "too late to stop: the answer is being saved"
                self.panel.refresh_status()
            if result.stopped or result.reason or not self.state.busy:
                return
            log.info("stop: no turn in flight on the service yet; asking again")
            await asyncio.sleep(min(0.2 * (attempt + 1), STOP_PAUSE_MAX))
