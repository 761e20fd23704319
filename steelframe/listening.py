"""Where `serve` listens, said once it does, and the one reader of what it says.

For a person (and scripts) a line `url: http://host:port` on standard output; with
`STEELFRAME_LOG_FORMAT=json` the same line is a JSON log record whose `url` field holds the
address, so a log pipeline reading the process's output meets only JSON lines. Whatever
starts serve and needs its port (tests, benchmarks) reads either with `announced_url`.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from steelframe.logs import json_record

URL_PREFIX = "url: "
LOGGER = "steelframe.serve"


def listening_line(url: str, *, as_record: bool, **fields: str) -> str:
    """The line saying `url`; `fields` (a JSON record's only) say more, e.g. `processes`."""
    if not as_record:
        return f"{URL_PREFIX}{url}"
    record = json_record(LOGGER, f"listening on {url}", fields={"url": url, **fields})
    return json.dumps(record, ensure_ascii=False)


def say_listening(
    url: str, *, as_record: bool, stream: TextIO | None = None, **fields: str
) -> None:
    print(listening_line(url, as_record=as_record, **fields), file=stream or sys.stdout, flush=True)


def announced_url(line: str | bytes) -> str | None:
    """The address a line of serve's output announces (either form), else None."""
    text = (line.decode(errors="replace") if isinstance(line, bytes) else line).strip()
    if text.startswith(URL_PREFIX):
        return text.removeprefix(URL_PREFIX).strip()
    if not text.startswith("{"):
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    url = record.get("url") if isinstance(record, dict) else None
    return url if isinstance(url, str) and record.get("logger") == LOGGER else None
