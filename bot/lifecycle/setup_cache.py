"""The prepared workspace, kept per repository: what setup produced (the files it added to
the checkout, such as `node_modules/` or `.venv/`), keyed by the setup commands and the
contents of the repository's key files (lockfiles), so the next run restores it instead of
running setup again.

Layout: `<data_dir>/setup-cache/<owner>/<repo>/<key>/` holding `files/` (the products, at
their paths in the checkout) and `meta.json` (which paths). Per repository, never shared:
the key is looked up only in the repository's own folder. Written atomically: an entry is
built under a `.partial-*` name and renamed into place, so a crash mid-write leaves only a
partial folder that no lookup ever uses (pruned later). Bounded: the newest `keep` entries
per repository stay (a restore counts as use).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bot.lifecycle.repo_config import RepoConfig, matches_key_file
from bot.lifecycle.setup_secrets import secrets_file

log = logging.getLogger(__name__)
# Bump when what an entry holds changes meaning: older entries then never match.
FORMAT = "steelframe-setup-cache-1"
PARTIAL = ".partial-"
TRASH = ".trash-"
# A partial folder this old belongs to a writer that died.
STALE_PARTIAL_SECONDS = 3600.0
SET_ID = stat.S_ISUID | stat.S_ISGID


@dataclass(frozen=True)
class TreeEntry:
    """One file of the base commit, as `git ls-tree -r` lists it."""

    path: str
    sha: str


def cache_key(config: RepoConfig, tree: Iterable[TreeEntry]) -> str:
    """What decides whether a kept workspace fits: the setup commands, the secrets' names,
    the key-file patterns, and each key file's path and content (its blob id)."""
    digest = hashlib.sha256(FORMAT.encode())
    recipe = {
        "setup": list(config.setup),
        "secrets": list(config.setup_secrets),
        "key_files": list(config.cache.key_files),
    }
    digest.update(json.dumps(recipe, sort_keys=True).encode())
    for entry in sorted(tree, key=lambda e: e.path):
        if matches_key_file(entry.path, config.cache.key_files):
            digest.update(f"\n{entry.path}\0{entry.sha}".encode())
    return digest.hexdigest()[:40]


def copy_path(source: Path, target: Path) -> None:
    """A file, symlink (as a link) or folder, copied with its modes (`copy_file`)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    elif source.is_dir():
        shutil.copytree(source, target, symlinks=True, copy_function=copy_file)
    else:
        copy_file(source, target)


def copy_file(source: Path | str, target: Path | str) -> None:
    """One file with its modes but never set-uid or set-gid: the worker copies as root, so
    a set-uid program setup made (the repository's code) became a set-uid-root one on the
    host, in the setup cache and in the next run's checkout."""
    shutil.copy2(source, target, follow_symlinks=False)
    mode = os.lstat(target).st_mode
    if stat.S_ISREG(mode) and mode & SET_ID:
        os.chmod(target, stat.S_IMODE(mode) & ~SET_ID)


def free_place(checkout: Path, rel: str) -> bool:
    """Whether setup's product may go to `checkout/rel`: nothing is there yet, and no folder
    on the way is a symlink (on a continuation the checkout is the branch an agent wrote,
    and the worker, root in the image, must never write through a link it planted)."""
    here = checkout
    for part in Path(rel).parts[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            return False
    target = checkout / rel
    return not (target.exists() or target.is_symlink())


@dataclass(frozen=True)
class Restored:
    paths: list[str]


@dataclass(frozen=True)
class SetupCache:
    root: Path  # <data_dir>/setup-cache
    keep: int

    @property
    def enabled(self) -> bool:
        return self.keep > 0

    def folder(self, repo: str) -> Path:
        """The repository's own folder (its name checked as the secrets file's is)."""
        file = secrets_file(self.root, repo)
        return file.parent / file.name.removesuffix(".env")

    def lookup(self, repo: str, key: str) -> Path | None:
        if not self.enabled:
            return None
        entry = self.folder(repo) / key
        if not (entry / "meta.json").is_file():
            return None
        try:
            os.utime(entry)  # used now: the newest is kept longest
        except OSError:
            return None
        return entry

    def restore(self, entry: Path, checkout: Path) -> Restored:
        """Copy the entry's products into `checkout` (a path the checkout already has stays
        as it is: the branch wins). Raises OSError if the entry went away meanwhile; the
        caller then removes what was copied (`Restored` is not returned) and runs setup."""
        paths = list(json.loads((entry / "meta.json").read_text())["paths"])
        copied: list[str] = []
        try:
            for rel in paths:
                if not free_place(checkout, rel):
                    continue
                copy_path(entry / "files" / rel, checkout / rel)
                copied.append(rel)
        except OSError:
            for rel in copied:
                remove_path(checkout / rel)
            raise
        return Restored(copied)

    def store(self, repo: str, key: str, source: Path, paths: list[str]) -> bool:
        """Keep `paths` of `source` under `key`, atomically; False when not kept (disabled,
        another run kept the same key first, or the disk refused)."""
        if not self.enabled:
            return False
        folder = self.folder(repo)
        partial = folder / f"{PARTIAL}{secrets.token_hex(6)}"
        try:
            partial.mkdir(parents=True)
            for rel in paths:
                copy_path(source / rel, partial / "files" / rel)
            (partial / "files").mkdir(exist_ok=True)
            meta = {"format": FORMAT, "repo": repo, "key": key, "paths": paths, "at": time.time()}
            (partial / "meta.json").write_text(json.dumps(meta))
            os.rename(partial, folder / key)  # atomic: the entry is whole or absent
        except OSError as exc:
            log.info("setup cache: %s %s not kept (%s)", repo, key[:12], exc)
            shutil.rmtree(partial, ignore_errors=True)
            return False
        self.prune(repo)
        return True

    def prune(self, repo: str) -> None:
        """Keep the newest `keep` entries of the repository; drop stale partial folders."""
        folder = self.folder(repo)
        try:
            children = list(folder.iterdir())
        except OSError:
            return
        now, ages = time.time(), {}
        for child in children:
            with contextlib.suppress(OSError):  # another run pruned it meanwhile
                ages[child] = now - child.stat().st_mtime
        entries = sorted((c for c in ages if not c.name.startswith(".")), key=ages.__getitem__)
        doomed = entries[self.keep :]
        doomed += [
            c
            for c, age in ages.items()
            if c.name.startswith((PARTIAL, TRASH)) and age > STALE_PARTIAL_SECONDS
        ]
        for old in doomed:
            # Renamed first, so a lookup never finds an entry half removed.
            trash = folder / f"{TRASH}{secrets.token_hex(6)}"
            try:
                os.rename(old, trash)
            except OSError:
                continue
            shutil.rmtree(trash, ignore_errors=True)


def remove_path(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
