"""Setup-only secrets: read from the operator's store, given to setup alone, and looked for
in whatever setup leaves behind.

The store is a folder (`STEELFRAME_SETUP_SECRETS_DIR`) with one dotenv file per
repository, `<owner>/<repo>.env`; the repository's config names which of its variables
setup gets (`setup_secrets`). Never the App's credentials: a value the worker already holds
as a secret of its own (the App key, the webhook secret, a model key, a database password)
is refused. The agent's sandbox never gets them; what setup leaves in the workspace is
searched for their values before anything of it is kept or shown to the agent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from dotenv import dotenv_values

from bot.lifecycle.redact import MIN_SECRET, Redactor

# A repository's owner and name as GitHub spells them; anything else never names a file.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
CHUNK = 1 << 20
MAX_FOUND = 20


class SetupSecretError(Exception):
    """A setup secret cannot be given: `public` is the task's one line, `private` (for the
    operator's log) says where to look."""

    def __init__(self, public: str, private: str) -> None:
        super().__init__(public)
        self.public = public
        self.private = private


def secrets_file(folder: Path, repo: str) -> Path:
    owner, _, name = repo.partition("/")
    if not _NAME.fullmatch(owner) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise SetupSecretError(
            "setup secrets are not available for this repository name",
            f"repository name {repo!r} does not name a secrets file",
        )
    return folder / owner / f"{name}.env"


def load(
    folder: Path | None, repo: str, names: tuple[str, ...], *, worker_secrets: Redactor
) -> dict[str, str]:
    """The named secrets of `repo` (empty when none are named). Raises SetupSecretError
    when one is missing, too short to be recognised, or is one of the worker's own."""
    if not names:
        return {}
    if folder is None:
        raise SetupSecretError(
            f"the repository's setup needs secrets ({', '.join(names)}) and this installation "
            "keeps none (STEELFRAME_SETUP_SECRETS_DIR is not set)",
            "STEELFRAME_SETUP_SECRETS_DIR is not set",
        )
    path = secrets_file(folder, repo)
    stored = {k: v for k, v in dotenv_values(path).items() if v} if path.is_file() else {}
    missing = [name for name in names if name not in stored]
    if missing:
        raise SetupSecretError(
            f"setup secret {', '.join(missing)} is not configured for this repository",
            f"{', '.join(missing)} missing from {path}",
        )
    chosen = {name: str(stored[name]) for name in names}
    for name, value in chosen.items():
        if len(value.strip()) < MIN_SECRET:
            raise SetupSecretError(
                f"setup secret {name} is too short to be kept out of logs",
                f"{name} in {path} has fewer than {MIN_SECRET} characters",
            )
        if worker_secrets.contains_secret(value):
            raise SetupSecretError(
                f"setup secret {name} was refused: it holds one of the worker's own secrets",
                f"{name} in {path} holds a value the worker keeps secret (the App's key, the "
                "webhook secret, a model key or a database password); never give those to setup",
            )
    return chosen


def _holds(path: Path, needles: list[bytes]) -> bool:
    """Whether the file's bytes contain any needle (read in chunks, overlapping so a value
    split across two reads is still found)."""
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            window = tail + chunk
            if any(needle in window for needle in needles):
                return True
            tail = window[-overlap:] if overlap else b""
    return False


def files_holding(root: Path, paths: Iterable[str], values: Mapping[str, str]) -> list[str]:
    """The paths (relative to `root`, under `paths`) whose name or bytes hold a secret value;
    symlinks are not followed (their target text is checked as a name)."""
    # Each value as given and trimmed, as the redactor knows it: a value stored with spaces
    # around it and written by a shell that trims them (`$TOKEN` unquoted) was not found.
    needles = sorted({n.encode() for v in values.values() for n in (v, v.strip()) if n.strip()})
    if not needles:
        return []
    found: list[str] = []

    def check(path: Path) -> None:
        rel = str(path.relative_to(root))
        if any(needle in os.fsencode(rel) for needle in needles):
            found.append(rel)
        elif path.is_symlink():
            if any(needle in os.fsencode(os.readlink(path)) for needle in needles):
                found.append(rel)
        elif path.is_file() and _holds(path, needles):
            found.append(rel)

    for top in paths:
        start = root / top
        check(start)
        if start.is_dir() and not start.is_symlink():
            for folder, dirs, files in os.walk(start):
                for name in (*dirs, *files):
                    check(Path(folder) / name)
                    if len(found) >= MAX_FOUND:
                        return found
    return found
