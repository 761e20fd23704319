"""What a chat turn is made with (`TurnParts`), given whole by the composition
(steelframe/parts.py) to the turn pipeline (bot.chat.pipeline)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.chat.coordination import TurnLocks
from bot.chat.grounding import Grounder
from bot.chat.intents import IntentPolicy
from bot.chat.issue_context import IssueContextLoader
from bot.checkouts import ManagedCheckouts
from bot.config import AgentConfig
from bot.events import OperatorEvents
from bot.runtimes.base import Runtime

RuntimeFactory = Callable[[AgentConfig], Runtime]


@dataclass(frozen=True)
class TurnParts:
    """What a turn is made with besides the database and the registry, given whole by the
    composition (bot/services.py)."""

    runtimes: RuntimeFactory
    grounder: Grounder
    policy: IntentPolicy
    locks: TurnLocks
    events: OperatorEvents | None
    # Reads the focused issue from GitHub for each turn; None without a GitHub App.
    issues: IssueContextLoader | None
    # Managed clones of each agent's repository (with a GitHub App); None: configured.
    checkouts: ManagedCheckouts | None
