"""Whether a secret file (`.env`, a private key) is, or could be, committed to git.

`doctor` warns about tracked ones; `github register` warns when it wrote one into a
checkout where git would pick it up. No git on PATH, or no checkout: nothing to say.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

# What a checkout must never track: the names `register` and Probot write.
SECRET_PATTERNS = (".env", "*.pem", "*.private-key.pem", "**/.env", "**/*.pem")
GIT_SECONDS = 10


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str] | None:
    git = shutil.which("git")
    if git is None or not cwd.is_dir():
        return None
    try:
        return subprocess.run(
            [git, *args], cwd=cwd, capture_output=True, text=True, timeout=GIT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def tracked_secrets(checkout: Path, extra: Iterable[Path] = ()) -> list[str]:
    """Secret files git tracks in the checkout at `checkout` (paths as git names them):
    `.env`, `*.pem`, and any `extra` file (the configured PRIVATE_KEY_PATH)."""
    patterns = [*SECRET_PATTERNS, *(str(path.resolve()) for path in extra)]
    result = _git(["ls-files", "--full-name", "--", *patterns], checkout)
    if result is None or result.returncode != 0:
        return []
    return sorted(set(result.stdout.split()))


def committable(path: Path) -> bool:
    """True when `path` lies in a git checkout that does not ignore it (a `git add -A`
    away from being committed)."""
    folder = path.resolve().parent
    inside = _git(["rev-parse", "--is-inside-work-tree"], folder)
    if inside is None or inside.stdout.strip() != "true":
        return False
    ignored = _git(["check-ignore", "-q", str(path.resolve())], folder)
    return ignored is not None and ignored.returncode == 1
