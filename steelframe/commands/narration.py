"""What a long-running command (`serve`, `worker`) says while it starts and works: a line
for a person at a terminal, or with `STEELFRAME_LOG_FORMAT=json` a log record, so a log
pipeline reading the process's output (compose.yaml sets json) meets only JSON lines."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from bot.config import Settings


@dataclass(frozen=True)
class Narrator:
    """`prefix` starts a terminal warning (`steelframe worker: warning: ...`); a log record
    carries the logger's name and level instead."""

    logger: logging.Logger
    prefix: str
    as_records: bool

    @classmethod
    def for_command(cls, settings: Settings, *, logger: str, prefix: str) -> Narrator:
        """Call after `configure_logging(settings)`: records go through its handler."""
        return cls(logging.getLogger(logger), prefix, settings.log_format == "json")

    def say(self, line: str) -> None:
        """Progress: standard output, or an INFO record."""
        if self.as_records:
            self.logger.info(line)
        else:
            print(line, flush=True)

    def warn(self, text: str) -> None:
        """Something to look at: standard error after the prefix, or a WARNING record."""
        if self.as_records:
            self.logger.warning(text)
        else:
            print(f"{self.prefix}: warning: {text}", file=sys.stderr, flush=True)
