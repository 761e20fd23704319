"""The operator events stream: task changes, task results and session changes, per operator
(docs/api.md, "Events"). `log` stores the frames (bot.contracts.events), `publisher` decides
to whom. What a committed transaction changed is reported by `bot.lifecycle.announce`: this
package knows nothing of tasks (import-linter holds the arrow lifecycle -> events)."""

from bot.contracts.events import SessionChange
from bot.events.log import Batch, Event, EventLog, LocalEventLog, RedisEventLog
from bot.events.publisher import OperatorEvents

__all__ = [
    "Batch",
    "Event",
    "EventLog",
    "LocalEventLog",
    "OperatorEvents",
    "RedisEventLog",
    "SessionChange",
]
