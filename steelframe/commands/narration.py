"""What a long-running command (`serve`, `worker`) says while it starts and works: a line
for a person at a terminal, or with `STEELFRAME_LOG_FORMAT=json` a log record, so a log
pipeline reading the process's output (compose.yaml sets json) meets only JSON lines."""

from __future__ import annotations

import io
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

    def error(self, text: str) -> None:
        """A failure while the command runs (a part of it died): standard error after the
        prefix, or an ERROR record. (A start-up failure is cli.main's plain line.)"""
        if self.as_records:
            self.logger.error(text)
        else:
            print(f"{self.prefix}: {text}", file=sys.stderr, flush=True)

    def with_prefix(self, prefix: str) -> Narrator:
        """The same narrator, its terminal lines starting `prefix:` instead."""
        return Narrator(self.logger, prefix, self.as_records)


class NarratedLines(io.StringIO):
    """A text stream whose each line is `narrator.say`: for progress a command prints to a
    stream (the memory index rebuild), a log record per line in JSON mode."""

    def __init__(self, narrator: Narrator) -> None:
        super().__init__()
        self._narrator = narrator
        self._pending = ""

    def write(self, text: str) -> int:
        # A terminal bar redraws with \r: only the last drawing of a line is said.
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._narrator.say(line.rsplit("\r", 1)[-1])
        return len(text)

    def close(self) -> None:
        if self._pending:
            self._narrator.say(self._pending.rsplit("\r", 1)[-1])
            self._pending = ""
        super().close()
