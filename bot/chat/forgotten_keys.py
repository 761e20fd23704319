"""What the records of keyed chat turns keep, without the words a `forget that <words>`
named (bot.chat.forgotten).

A chat turn sent with an idempotency key keeps a row for its key (bot.chat.turn_keys): what
was asked (the operator's message) and the turn's first and terminal frames, whose `done`
carries the reply, the session's messages, the retrieved hits and the drafts. A send again
with the key answers those frames, so they would show the words again after the forget took
them out of the sessions. The forget takes them out of these rows too, the forget turn's
own included (its end is recorded after the forget, as its terminal frame goes out:
`end_without`). Only the text a person or a model wrote is changed (messages, replies,
reasoning, previews, drafts, notes, queries, errors); ids, names and the frames' kinds are
not, so every frame still reads as it did.
"""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import Select, Text, cast, func, or_, select
from sqlalchemy.orm import Session

from bot.chat.forget_words import Words
from bot.chat.frames import NumberedFrame
from bot.chat.turn_keys import KIND, KeyedTurn, TurnEnd
from bot.contracts.chat import ChatResponse, DoneFrame, ErrorFrame, Frame, Message, StatusFrame
from bot.contracts.hits import RetrievedHit
from bot.idempotency import SideEffect

replace = msgspec.structs.replace


def forget_in_keyed_turns(session: Session, session_ids: Select[str], words: Words) -> int:
    """Take the words out of the rows of the turns sent with a key in `session_ids` (what
    was asked, and the recorded end); how many rows changed. Running it again changes
    nothing."""
    said = [func.lower(cast(SideEffect.request, Text)).like(words.like, escape="\\")]
    said.append(func.lower(cast(SideEffect.result, Text)).like(words.like, escape="\\"))
    query = select(SideEffect).where(
        SideEffect.kind == KIND,
        SideEffect.request["session_id"].as_string().in_(session_ids.scalar_subquery()),
    )
    if words.like_in_json:  # else every keyed turn of the sessions is read
        query = query.where(or_(*said))
    changed = 0
    for row in session.scalars(query.order_by(SideEffect.id).with_for_update()):
        turn = msgspec.convert(row.request, KeyedTurn)
        asked = replace(turn.asked, message=words.out_of(turn.asked.message))
        request = msgspec.to_builtins(replace(turn, asked=asked))
        result = row.result
        if result is not None:
            result = msgspec.to_builtins(end_without(msgspec.convert(result, TurnEnd), words))
        if (request, result) != (row.request, row.result):
            row.request, row.result = request, result
            changed += 1
    return changed


def end_without(end: TurnEnd, words: Words) -> TurnEnd:
    """A keyed turn's recorded end without the words."""
    return TurnEnd(frames=[_frame_without(data, words) for data in end.frames])


def _frame_without(data: str, words: Words) -> str:
    numbered = NumberedFrame.stored(data.encode())
    without = numbered_without(numbered, words)
    if without is numbered:
        return data  # as recorded, byte for byte
    return without.data.decode()


def numbered_without(numbered: NumberedFrame, words: Words) -> NumberedFrame:
    """The frame, numbered as it was, without the words; the same object if it did not say
    them (also for the frames a turn relayed: bot.chat.forgotten_frames)."""
    frame = _without(numbered.frame, words)
    return numbered if frame == numbered.frame else NumberedFrame.of(numbered.id, frame)


def _without(frame: Frame, words: Words) -> Frame:
    out = words.out_of
    if isinstance(frame, StatusFrame):
        return replace(
            frame, message=out(frame.message), detail=out(frame.detail), query=out(frame.query)
        )
    if isinstance(frame, DoneFrame):
        return replace(frame, response=_response_without(frame.response, words))
    if isinstance(frame, ErrorFrame):
        return replace(frame, error=out(frame.error))
    return replace(frame, text=out(frame.text))  # a thinking or delta frame


def _response_without(response: ChatResponse, words: Words) -> ChatResponse:
    out = words.out_of
    return replace(
        response,
        reply=out(response.reply),
        history=[_message_without(message, words) for message in response.history],
        retrieved=[_hit_without(hit, words) for hit in response.retrieved],
        reasoning=out(response.reasoning),
        decision_body=out(response.decision_body),
        pending_title=out(response.pending_title),
        pending_body=out(response.pending_body),
        notes=out(response.notes),
    )


def _message_without(message: Message, words: Words) -> Message:
    meta: Any = words.out_of(message.meta)  # as the session's stored message (forgotten.py)
    return replace(
        message,
        content=words.out_of(message.content),
        reasoning=words.out_of(message.reasoning),
        meta=meta,
    )


def _hit_without(hit: RetrievedHit, words: Words) -> RetrievedHit:
    return replace(hit, preview=words.out_of(hit.preview), text=words.out_of(hit.text))
