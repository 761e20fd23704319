"""A closed chat session's summary kept in session memory (a `chat_summary` chunk)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy.orm import Session

from bot.chat.summary import SessionSummary, SummarySink
from bot.config import AgentConfig
from memory import ChunkError, ChunkIn, ChunkSource, add_chunk

log = logging.getLogger(__name__)


def chat_summary_sink(agents: Mapping[str, AgentConfig]) -> SummarySink:
    """Store each closed chat session's summary as a `chat_summary` chunk (same transaction
    as the summary; the key makes a re-run replace rather than duplicate it)."""

    def sink(session: Session, summary: SessionSummary) -> None:
        agent = agents.get(summary.agent)
        if agent is None:
            log.warning(
                "summary of session %s: agent %s is gone", summary.session_id, summary.agent
            )
            return
        chunk = ChunkIn(
            text=summary.text,
            source=ChunkSource.CHAT_SUMMARY,
            repo=agent.repo,
            issue=summary.focus,
            session_id=summary.session_id,
            key=f"chat_summary:{summary.session_id}",
        )
        try:
            add_chunk(session, chunk)
        except ChunkError as exc:
            log.warning(
                "summary of session %s not stored in memory: %s", summary.session_id, exc.message
            )

    return sink
