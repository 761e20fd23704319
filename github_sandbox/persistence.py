"""Keeping a dev sandbox's world across restarts of `steelframe dev` (issue numbers must not
start again at 1 while the service's database remembers the old ones). A local file of
our own making: pickle is fine here, it is never read from anywhere else."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

from github_sandbox.state import World

log = logging.getLogger(__name__)


def save_world(world: World, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    clock = world.clock
    try:
        world.clock = None  # type: ignore[assignment]  # a test's fake clock may not pickle
        temporary.write_bytes(pickle.dumps(world))
    finally:
        world.clock = clock
    os.replace(temporary, path)  # atomic: a crash leaves the old file or the new one


def load_world(path: Path) -> World | None:
    if not path.exists():
        return None
    try:
        world = pickle.loads(path.read_bytes())
    except Exception as exc:  # a file from an older sandbox: start afresh
        log.warning("sandbox state %s unreadable (%s); starting empty", path, exc)
        return None
    return world if isinstance(world, World) else None
