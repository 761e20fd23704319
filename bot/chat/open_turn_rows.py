"""The row that keeps a chat turn acknowledged but not yet stored: written with the turn's
session (`bot.chat.session_store.open_for_turn`), deleted with its two messages
(`persist_turn`, a cut note's too) or when it ends without them (stopped, failed). A row
left over is a turn whose process was killed mid-turn; the next start notes it in its
session (bot.chat.left_turns), and records that end for its idempotency key, which the row
names (`key`: the row key of the turn's `side_effects` row, bot.chat.turn_keys)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text, bindparam, delete, insert, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.db import Base


class OpenTurn(Base):
    __tablename__ = "chat_open_turns"

    turn_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    operator_id: Mapped[int] = mapped_column(ForeignKey("operators.id", ondelete="CASCADE"))
    session_id: Mapped[str] = mapped_column(
        ForeignKey("chat_sessions.id", ondelete="CASCADE"), index=True
    )
    message: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime]
    # The turn's idempotency key's row key (bot.chat.turn_keys.row_key); None: sent without.
    key: Mapped[str | None] = mapped_column(String(120), default=None)
    # The forget epoch it opened at: it leaves out the words of the forgets raised since
    # as it stores (bot.chat.pending_forgets).
    forget_epoch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


# Plain statements on the session's connection, as the turn's other writes in a group
# commit are (bot.chat.session_store).
INSERT_OPEN = insert(OpenTurn)
FORGET_OPEN = delete(OpenTurn).where(OpenTurn.turn_id == bindparam("p_turn"))


def open_key(session: Session, turn_id: str) -> str | None:
    """The idempotency key's row key of the turn kept open (None: sent without one, or not
    kept open)."""
    return session.scalar(select(OpenTurn.key).where(OpenTurn.turn_id == turn_id))


def forget_open(session: Session, turn_id: str) -> None:
    """The turn ended without storing its messages (stopped, failed): nothing to note."""
    session.connection().execute(FORGET_OPEN, {"p_turn": turn_id})
