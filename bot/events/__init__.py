"""The operator events stream: task changes, task results and session changes, per operator
(docs/api.md, "Events"). `log` stores, `publisher` decides what and to whom, `commits`
reports what committed transactions changed."""

from bot.events.commits import watch_commits
from bot.events.log import Batch, Event, EventLog, LocalEventLog, RedisEventLog
from bot.events.publisher import (
    EventType,
    OperatorEvents,
    ResultKind,
    ResultMessage,
    SessionChange,
    TaskChange,
)

__all__ = [
    "Batch",
    "Event",
    "EventLog",
    "EventType",
    "LocalEventLog",
    "OperatorEvents",
    "RedisEventLog",
    "ResultKind",
    "ResultMessage",
    "SessionChange",
    "TaskChange",
    "watch_commits",
]
