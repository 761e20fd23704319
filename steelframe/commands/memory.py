"""`steelframe memory add|search|forget|reindex`: seed, inspect, forget and rebuild session
memory (their options: memory_options.py)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from bot import db as dbmod
from steelframe.cli import load_settings, require_data_dir

if TYPE_CHECKING:
    from memory.segment import Record

BAR_WIDTH = 30


@contextmanager
def _memory() -> Iterator[Any]:
    from memory import Memory

    settings = load_settings()
    # The index lives in the data folder: one that cannot be made is one line now, before
    # a note is stored in the database with nowhere to index it.
    require_data_dir(settings)
    database = dbmod.Database.from_url(settings.database_url)
    try:
        dbmod.upgrade(database.engine)
        memory = Memory.in_data_dir(settings.data_dir, database.session)
        # An index of another database under this data directory is rebuilt before use,
        # with the bar on stderr (the command's own output stays clean).
        if memory.bind(progress=progress_bar(sys.stderr)) == "rebuilt":
            print("memory index rebuilt from this database", file=sys.stderr)
        yield settings, memory
    finally:
        database.dispose()


def cmd_add(args: argparse.Namespace) -> int:
    from memory import ChunkError, ChunkIn

    text = sys.stdin.read() if args.text == "-" else args.text
    with _memory() as (settings, memory):
        chunk = ChunkIn(
            text=text,
            source=args.source,
            repo=args.repo or settings.repo,
            issue=args.issue,
            session_id=args.session_id,
            paths=tuple(p.strip() for p in args.paths.split(",") if p.strip()),
            key=args.key,
        )
        try:
            added = memory.add([chunk])[0]
        except ChunkError as exc:
            print(f"steelframe: {exc.message}", file=sys.stderr)
            return 2
    if not added.created:
        print(f"already stored as chunk {added.id} (same key, same content)")
    elif added.replaced:
        print(f"stored chunk {added.id}, replacing chunk {added.replaced}")
    else:
        print(f"stored chunk {added.id}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from bot.chat.retrieval_hits import CHAT_FLOOR
    from memory import IndexUnavailable

    if args.k <= 0 or (args.floor is not None and not 0.0 <= args.floor <= 1.0):
        print("steelframe: -k must be positive and --floor between 0 and 1", file=sys.stderr)
        return 2
    if not args.query.strip():  # else "no hits", as if memory had nothing on it
        print("steelframe: the query is empty: say what to look for", file=sys.stderr)
        return 2
    floor = CHAT_FLOOR if args.floor is None else args.floor
    with _memory() as (_settings, memory):
        try:
            memory.sync()
            hits = memory.search(
                args.query, repo=args.repo, focus=args.focus, k=args.k, floor=floor
            )
        except IndexUnavailable as exc:
            print(f"steelframe: memory index unavailable: {exc.message}", file=sys.stderr)
            print(
                "run `steelframe memory reindex` to rebuild it from the database", file=sys.stderr
            )
            return 1
    if not hits:
        print(f"no hits at or above cosine {floor:g} (try --floor 0)")
        return 0
    for rank, hit in enumerate(hits, 1):
        print(f"{rank}. {hit.score:.4f}  {_provenance(hit.record)}")
        print(f"   {hit.preview}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    """Forget by key (each must name a live chunk) or everything about an issue, printing
    each chunk forgotten. Nothing to forget is an error (exit 1): a mistyped key must not
    look forgotten."""
    if bool(args.keys) == (args.issue is not None):
        print("steelframe: give chunk keys or --issue N (not both)", file=sys.stderr)
        return 2
    if args.issue is not None and args.issue <= 0:
        print("steelframe: --issue must be a positive number", file=sys.stderr)
        return 2
    with _memory() as (settings, memory):
        if args.issue is not None:
            repo = args.repo or settings.repo
            forgotten = memory.forget_issue(repo, args.issue)
            for chunk in forgotten:
                print(f"forgot {chunk.provenance}")
            if not forgotten:
                print(
                    f"steelframe: nothing in memory about #{args.issue} in {repo}", file=sys.stderr
                )
            return 0 if forgotten else 1
        unknown = 0
        for key in dict.fromkeys(args.keys):
            one = memory.forget_key(key)
            if one is not None:
                print(f"forgot {one.provenance}")
            else:
                print(f"steelframe: no chunk in memory under key {key!r}", file=sys.stderr)
                unknown += 1
        return 1 if unknown else 0


def _provenance(record: Record) -> str:
    parts = [record.source, record.repo, f"chunk {record.id}"]
    if record.issue:
        parts.insert(0, f"#{record.issue}")
    if record.session_id:
        parts.append(f"session {record.session_id}")
    if record.paths:
        parts.append("paths " + ", ".join(record.paths))
    return " · ".join(parts)


def cmd_reindex(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    with _memory() as (_settings, memory):
        manifest = memory.reindex(progress=progress_bar(sys.stdout))
    print(
        f"index rebuilt: {manifest.live_docs:,} chunks in {len(manifest.segments)} segment(s),"
        f" {time.perf_counter() - started:.1f} s"
    )
    return 0


def upgrade_memory_index(settings: Any, stream: TextIO) -> None:
    """`upgrade_index` for a command that has no app yet (`serve` before its processes)."""
    from memory import Memory

    database = dbmod.Database.from_url(settings.database_url)
    try:
        dbmod.upgrade(database.engine)
        upgrade_index(Memory.in_data_dir(settings.data_dir, database.session), stream)
    finally:
        database.dispose()


def upgrade_index(memory: Any, stream: TextIO) -> None:
    """At start-up: an index built with an older analysis is rebuilt now, with a bar."""
    if memory is not None and memory.upgrade_index(
        progress=progress_bar(stream, label="memory index rebuild (new analysis)")
    ):
        print("memory index rebuilt", file=stream, flush=True)


def progress_bar(stream: TextIO, *, label: str = "reindex") -> Callable[[int, int], None]:
    """A redrawn bar on a terminal; a line per tenth elsewhere (logs, pipes)."""
    interactive = stream.isatty()
    shown: set[int] = set()

    def show(done: int, total: int) -> None:
        fraction = 1.0 if total <= 0 else min(1.0, done / total)
        tenth = int(fraction * 10)
        if not interactive and tenth in shown:
            return
        shown.add(tenth)
        filled = int(fraction * BAR_WIDTH)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        line = f"{label} [{bar}] {fraction:4.0%} {done:,}/{total:,} chunks"
        if interactive:
            stream.write("\r" + line + ("\n" if fraction >= 1.0 else ""))
        else:
            stream.write(line + "\n")
        stream.flush()

    return show
