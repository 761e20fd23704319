"""Requests aiohttp refuses before any handler sees them (a header line over 8 KB, a
malformed request line) are logged as one line, not an ERROR with a traceback each.

aiohttp answers them itself (400, connection closed) and logs through `aiohttp.server`
with the parser's exception attached; anyone can send them, so a traceback per request
would let a stranger fill the log.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOGGER = "aiohttp.server"


class QuietParseErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = "refused a malformed request from %s: %s %s"
            record.args = (remote, exc.code, str(exc.message)[:200])
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_parse_errors() -> None:
    """Install the filter once per process (idempotent)."""
    logger = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(f, QuietParseErrors) for f in logger.filters):
        logger.addFilter(QuietParseErrors())
