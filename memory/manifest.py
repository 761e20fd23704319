"""The index manifest: which segments and tombstones make up the index, swapped atomically.

Writers build new files first and then replace `manifest.json` with `os.replace`, so a reader
sees either the old generation or the new one, never half of an update.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory.errors import IndexCorrupt, IndexForeign, IndexIncompatible
from memory.segment import SegmentInfo

FORMAT = 1
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Manifest:
    analysis: dict[str, Any]
    generation: int = 0
    segments: tuple[SegmentInfo, ...] = ()
    repos: tuple[str, ...] = ()
    dead_file: str | None = None
    dead_count: int = 0
    # Database catch-up: every chunk id <= watermark is indexed, except the `gaps` (ids not
    # visible when the watermark passed them: rolled back, or still in an open transaction),
    # each with the time it was first missed.
    watermark: int = 0
    gaps: dict[int, float] = field(default_factory=dict)
    # The identity of the database the rows came from (memory.identity); None: written
    # before identities existed, so its origin is unknown.
    database: str | None = None

    @property
    def docs(self) -> int:
        return sum(s.docs for s in self.segments)

    @property
    def live_docs(self) -> int:
        return self.docs - self.dead_count

    def next(self, **changes: Any) -> Manifest:
        return replace(self, generation=self.generation + 1, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "analysis": self.analysis,
            "generation": self.generation,
            "segments": [s.to_json() for s in self.segments],
            "repos": list(self.repos),
            "dead": {"file": self.dead_file, "count": self.dead_count},
            "watermark": self.watermark,
            "gaps": {str(k): v for k, v in sorted(self.gaps.items())},
            "database": self.database,
        }

    @classmethod
    def from_json(cls, data: Any, *, analysis: dict[str, Any]) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise IndexCorrupt("manifest has an unknown format")
        if data.get("analysis") != analysis:
            raise IndexIncompatible(
                "index was built with another analysis; run `steelframe memory reindex`"
            )
        try:
            return cls(
                analysis=analysis,
                generation=int(data["generation"]),
                segments=tuple(
                    SegmentInfo(str(s["name"]), int(s["docs"]), int(s["postings"]))
                    for s in data["segments"]
                ),
                repos=tuple(str(r) for r in data["repos"]),
                dead_file=data["dead"]["file"],
                dead_count=int(data["dead"]["count"]),
                watermark=int(data["watermark"]),
                gaps={int(k): float(v) for k, v in data["gaps"].items()},
                database=None if data.get("database") is None else str(data["database"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise IndexCorrupt(f"manifest is malformed ({type(exc).__name__}: {exc})") from exc


def check_database(manifest: Manifest, expected: str | None, root: Path) -> None:
    """Refuse an index built from another database (or of unknown origin) than `expected`;
    an empty index with no origin is anyone's."""
    if expected is None or manifest.database == expected:
        return
    if manifest.database is None and not manifest.segments:
        return
    origin = "an unknown database" if manifest.database is None else "another database"
    raise IndexForeign(
        f"the index in {root} was built from {origin}, not this one; "
        "run `steelframe memory reindex` (or set STEELFRAME_DATA_DIR to this database's own)"
    )


def read_manifest(root: Path, *, analysis: dict[str, Any]) -> Manifest | None:
    """The current manifest, or None when no index was ever written here."""
    try:
        raw = (root / MANIFEST).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexCorrupt(f"manifest unreadable ({exc.strerror})") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise IndexCorrupt("manifest is not valid JSON") from exc
    return Manifest.from_json(data, analysis=analysis)


def write_manifest(root: Path, manifest: Manifest) -> None:
    temporary = root / f".{MANIFEST}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(manifest.to_json(), handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, root / MANIFEST)
    directory = os.open(root, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
