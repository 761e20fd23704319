"""What the operator API's handlers use: one typed object, built whole by the composition
root (`steelframe.composition`) and reached through `app[OPERATOR_API]`."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from bot.chat.inflight import TurnRegistry
from bot.chat.pipeline import TurnPipeline
from bot.chat.session_service import SessionService
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.decisions import DecisionPublisher
from bot.events import OperatorEvents
from bot.filing import FilingService
from bot.lifecycle.terminate import Terminations
from bot.metrics import Metrics
from bot.readiness import Readiness
from operator_api.tokens import TokenCache


@dataclass(frozen=True)
class OperatorApi:
    settings: Settings
    db: Database
    chat_turns: TurnPipeline
    chat_sessions: SessionService
    registry: TurnRegistry
    events: OperatorEvents
    metrics: Metrics
    readiness: Readiness
    tokens: TokenCache
    clock: Clock
    # Operators' terminates when the task lifecycle runs (Redis configured); the board
    # answers without it, terminate and archive answer 503 (docs/api.md).
    terminations: Terminations | None
    # Filing and publishing when a GitHub App (or the dev sandbox) is configured; None: 503.
    filing: FilingService | None
    publisher: DecisionPublisher | None


OPERATOR_API = web.AppKey("operator_api", OperatorApi)
