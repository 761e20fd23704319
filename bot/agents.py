"""Agents: configured names bound to a repository, a read-only checkout and a runtime."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.config import AgentConfig
from bot.contracts.errors import ErrorDetail
from bot.errors import BadRequest
from bot.models import Agent

DEFAULT_AGENT = "default"


def sync_agents(
    session: Session, agents: Mapping[str, AgentConfig], *, clock: Clock = utcnow
) -> None:
    """Mirror the configured agents into the table sessions reference (upsert by name)."""
    for config in agents.values():
        row = session.get(Agent, config.name)
        if row is None:
            row = Agent(name=config.name)
            session.add(row)
        row.repo = config.repo
        row.checkout = str(config.checkout)
        row.runtime = config.runtime
        row.updated_at = clock()


def resolve_agent(agents: Mapping[str, AgentConfig], name: str | None) -> AgentConfig:
    # Only None means "the default": an empty name is a name no agent has.
    agent = agents.get(DEFAULT_AGENT if name is None else name)
    if agent is None:
        raise BadRequest(
            f"unknown agent {name!r}", detail=ErrorDetail(field="agent", known=sorted(agents))
        )
    return agent
