"""Logging for every entry point: text for a person at a terminal, or one JSON object per
line (`STEELFRAME_LOG_FORMAT=json`, Probot's `LOG_FORMAT`) for a log pipeline. Either way a
line carries the ids of the work it belongs to (bot/log_context.py), never a payload."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from bot.config import Settings
from bot.log_context import KNOWN_IDS, current_ids

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(ids)s"


class _WithIds(logging.Filter):
    """Adds the context's ids (and any passed as `extra=`) to the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = dict(current_ids())
        for name in KNOWN_IDS:
            value = getattr(record, name, None)
            if value is not None:
                ids[name] = str(value)
        record.log_ids = ids
        record.ids = "".join(f" {k}={v}" for k, v in ids.items())
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = json_record(
            record.name,
            record.getMessage(),
            level=record.levelname,
            created=record.created,
            fields=getattr(record, "log_ids", {}),
        )
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def json_record(
    logger: str,
    message: str,
    *,
    level: str = "INFO",
    created: float | None = None,
    fields: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """One JSON log line's object: what every record has, then its `fields` (the ids of
    the work it belongs to, or a value a reader looks for, such as serve's `url`)."""
    when = datetime.fromtimestamp(time.time() if created is None else created, UTC)
    return {
        "time": when.isoformat(timespec="milliseconds"),
        "level": level.lower(),
        "logger": logger,
        "message": message,
        **(fields or {}),
    }


def configure_logging(settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_WithIds())
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
        _errors_as_records()
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    # Like logging.basicConfig: handlers someone else installed (pytest's capture, an
    # embedding application) are left alone; ours replaces only ours.
    ours = [h for h in root.handlers if getattr(h, "steelframe", False)]
    if ours or not root.handlers:
        handler.steelframe = True  # type: ignore[attr-defined]
        for old in ours:
            root.removeHandler(old)
        root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # Alembic narrates every plugin and step at INFO; keep start-up output to what matters.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _errors_as_records() -> None:
    """In JSON mode Python's own error output is a record too: an uncaught exception and one
    raised where nothing can catch it ("Exception ignored in ...": a finaliser, a weakref
    callback hit by a signal during shutdown) went to stderr as a plain traceback, breaking
    the one-record-a-line stream a log collector parses."""
    errors = logging.getLogger("steelframe.errors")

    def uncaught(kind: type[BaseException], error: BaseException, trace: object) -> None:
        errors.critical("uncaught %s", kind.__name__, exc_info=(kind, error, trace))  # type: ignore[arg-type]

    def unraisable(info: sys.UnraisableHookArgs) -> None:
        where = info.err_msg or "Exception ignored in"
        error = info.exc_value
        errors.error(
            "%s: %r",
            where,
            info.object,
            exc_info=(info.exc_type, error, info.exc_traceback) if error is not None else None,
        )

    sys.excepthook = uncaught
    sys.unraisablehook = unraisable


def quiet_rq_bookkeeping() -> None:
    """RQ narrates its own bookkeeping at INFO (pub/sub channels, registry cleaning, how long
    a result is kept, "Job OK"): several lines a job around the lifecycle's own, which says
    when each run starts and how it ends. For a terminal a person reads (`dev`); RQ's
    warnings and errors still show, and at DEBUG everything does. Call after
    `configure_logging`."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # `rq.worker` by name: RQ sets that logger's own level (INFO) when it is imported.
        for name in ("rq", "rq.worker"):
            logging.getLogger(name).setLevel(logging.WARNING)


def access_logger(settings: Settings) -> logging.Logger | None:
    """aiohttp's access log (one line a request) only when asked for: at scale it is the
    load balancer's job, and a line per request costs more than some requests."""
    return logging.getLogger("aiohttp.access") if settings.access_log else None
