"""A turn's frames without the words a `forget that <words>` named: those relayed through
Redis (bot.chat.frames, read again by a client re-attaching through any instance for a
while after the turn) and those this process holds (bot.chat.inflight, for a re-attach
here). The forget takes them out of every turn of its repository (`FrameForgets.forget`),
and a turn that stores after a forget takes the forget's words out of its own
(`FrameForgets.in_turn`, bot.chat.pending_forgets). Each frame keeps its id and its place,
so a reader part way through reads on as before; a frame that said nothing of them is left
byte for byte.

A reply streams in pieces (`delta` frames, `thinking` the same), and the words may be cut
between two of them: a run of them is read as one text, and one that says the words is
sent whole by its first frame, the others left empty (`_run_without`).

Every instance does the same for the frames it holds when the forget is told to it
(bot.chat.coordination.ForgetSignal: `FrameForgets.forget_held`), and the frames waiting in
the relay's queue for a Redis that is away are taken out with those it holds, so they are
written without the words. With Redis away at the forget, the relayed frames
(`FrameForgets.forget_relayed`) and the other instances are reached once it is back
(bot.chat.forget_delivery); an instance that kept frames for Redis meanwhile reads the
forgets it missed before writing them (bot.chat.frame_outbox), and one whose listener was
away reads them when it subscribes again (the forgets' log, kept in Redis as long as the
relayed frames live: bot.chat.coordination). Not reached: frames a client has read already.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from redis.exceptions import RedisError

from bot.chat.forget_words import Words
from bot.chat.forgotten_keys import numbered_without
from bot.chat.frames import FramesChange, NumberedFrame
from bot.chat.inflight import TurnHandle, TurnRegistry
from bot.contracts.chat import DeltaFrame, ThinkingFrame

log = logging.getLogger(__name__)
_Streamed = DeltaFrame | ThinkingFrame


def frames_without(frames: list[NumberedFrame], words: Iterable[Words]) -> list[NumberedFrame]:
    """The frames without the words, numbered as they were; a frame that did not say them
    is the same object."""
    for found in words:
        frames = _without(frames, found)
    return frames


def _without(frames: list[NumberedFrame], words: Words) -> list[NumberedFrame]:
    result = [numbered_without(numbered, words) for numbered in frames]
    runs: dict[tuple[type, int], list[int]] = {}
    for place, numbered in enumerate(frames):
        frame = numbered.frame
        if not isinstance(frame, _Streamed):
            continue
        key = (type(frame), frame.draft)
        if isinstance(frame, DeltaFrame) and frame.replace:
            # What came before was discarded: a run of its own.
            _run_without(result, frames, runs.pop(key, []), words)
        runs.setdefault(key, []).append(place)
    for places in runs.values():
        _run_without(result, frames, places, words)
    return result


def _run_without(
    result: list[NumberedFrame], frames: list[NumberedFrame], places: list[int], words: Words
) -> None:
    """A run of streamed pieces: said whole by its first frame, without the words, if the
    run says them across its pieces."""
    if len(places) < 2:
        return
    pieces = [frames[place].frame for place in places]
    text = "".join(piece.text for piece in pieces if isinstance(piece, _Streamed))
    if not words.said_in(text):
        return
    for index, place in enumerate(places):
        piece = frames[place].frame
        said = words.out_of(text) if index == 0 else ""
        result[place] = NumberedFrame.of(
            frames[place].id, msgspec.structs.replace(piece, text=said)
        )


def in_handle(handle: TurnHandle, words: Iterable[Words]) -> bool:
    """The frames this process holds of the turn, without the words, in place (a reader
    part way through reads on from its place). Whether any changed."""
    before = list(handle.frames)
    after = frames_without(before, list(words))
    changed = False
    for place, (old, new) in enumerate(zip(before, after, strict=True)):
        if new is not old and handle.frames[place] is old:
            handle.frames[place] = new
            changed = True
    return changed


def _as_held(handle: TurnHandle | None, words: list[Words]) -> FramesChange:
    """A change of some of the turn's frames (those relayed, or those waiting): each as the
    turn's handle here holds it now, taken out of the whole turn (a run of pieces may be
    cut between the frames written and those waiting), then without the words."""
    held = {} if handle is None else {numbered.id: numbered for numbered in handle.frames}

    def change(frames: list[NumberedFrame]) -> list[NumberedFrame]:
        ours = [held.get(numbered.id, numbered) for numbered in frames]
        same = [new if new.data != old.data else old for old, new in zip(frames, ours, strict=True)]
        return frames_without(same, words)

    return change


@dataclass
class FrameForgets:
    """Takes forgotten words out of the turns' frames, relayed and held here."""

    registry: TurnRegistry

    async def in_turn(self, handle: TurnHandle, words: list[Words]) -> None:
        """A turn that stores after forgets: its own frames, here and relayed."""
        in_handle(handle, words)
        await self._rewrite_held(handle.turn_id, words)
        await self._rewrite(handle.turn_id, words)

    async def in_ended_turn(self, turn_id: str, words: list[Words]) -> None:
        """A turn whose instance went away (no handle here): its frames relayed, and any
        waiting here for Redis."""
        await self._rewrite_held(turn_id, words)
        await self._rewrite(turn_id, words)

    def held_here(self) -> set[str]:
        """The sessions of the turns whose frames this process holds, or keeps for Redis."""
        found = {handle.session_id for handle in self.registry.handles()}
        if self.registry.relay is not None:
            found |= {turn.session_id for turn in self.registry.relay.held_turns()}
        return found

    async def forget_held(self, words: Words, sessions: set[str]) -> set[str]:
        """The frames this process holds of every turn of `sessions`, and those it keeps for
        Redis, without the words; the sessions whose frames changed."""
        changed = {
            handle.session_id
            for handle in self.registry.handles()
            if handle.session_id in sessions and in_handle(handle, [words])
        }
        relay = self.registry.relay
        for turn in [] if relay is None else relay.held_turns():
            if turn.session_id in sessions and await self._rewrite_held(turn.turn_id, [words]):
                changed.add(turn.session_id)
        return changed

    async def relayed_sessions(self) -> set[str]:
        """The sessions of the turns Redis relays frames of; a RedisError when it is away."""
        relay = self.registry.relay
        return set() if relay is None else {t.session_id for t in await relay.relayed_turns()}

    async def forget_relayed(self, words: Words, sessions: set[str]) -> set[str]:
        """The frames Redis relays of every turn of `sessions` without the words; the
        sessions whose frames changed. A RedisError when it is away (a turn whose rewrite
        failed is done again by the next try: a rewrite of frames without the words changes
        nothing)."""
        relay = self.registry.relay
        if relay is None:
            return set()
        changed: set[str] = set()
        for turn in await relay.relayed_turns():
            if turn.session_id in sessions:
                change = _as_held(self.registry.held(turn.turn_id), [words])
                if await relay.rewrite(turn.turn_id, change):
                    changed.add(turn.session_id)
        return changed

    async def _rewrite_held(self, turn_id: str, words: list[Words]) -> bool:
        relay = self.registry.relay
        if relay is None:
            return False
        return await relay.rewrite_held(turn_id, _as_held(self.registry.held(turn_id), words))

    async def _rewrite(self, turn_id: str, words: list[Words]) -> bool:
        relay = self.registry.relay
        if relay is None:
            return False
        change = _as_held(self.registry.held(turn_id), words)
        try:
            return await relay.rewrite(turn_id, change)
        except RedisError as exc:
            log.warning("forget: turn %s's relayed frames kept (%s)", turn_id, type(exc).__name__)
            return False
