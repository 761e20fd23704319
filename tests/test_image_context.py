"""What `docker build .` sends to the builder: never a file that holds a secret. The Dockerfile
copies none of them, but the whole context goes to the builder (a remote one, a CI cache)
before any COPY runs, so `.dockerignore` must keep out every secret the docs tell an operator
to write into this checkout, and every env file compose.yaml reads."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _pattern(line: str) -> re.Pattern[str]:
    """One .dockerignore line as Docker matches it: relative to the context's root, `*` and
    `?` within one path segment, `**` across any number of them."""
    out = ""
    parts = re.split(r"(\*\*/?|\*|\?)", line.strip().strip("/"))
    for part in parts:
        if part in ("**", "**/"):
            out += "(?:.*/)?" if part == "**/" else ".*"
        elif part == "*":
            out += "[^/]*"
        elif part == "?":
            out += "[^/]"
        else:
            out += re.escape(part)
    # A matched folder takes everything under it.
    return re.compile(f"{out}(?:/.*)?")


@cache
def _rules() -> tuple[tuple[bool, re.Pattern[str]], ...]:
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        rules.append((keep, _pattern(line.lstrip("!"))))
    return tuple(rules)


def excluded(path: str) -> bool:
    """Whether `docker build` leaves `path` (relative to the context) out; the last
    matching line decides, as in Docker."""
    verdict = False
    for keep, pattern in _rules():
        if pattern.fullmatch(path):
            verdict = not keep
    return verdict


def test_the_matcher_reads_dockerignore_as_docker_does() -> None:
    assert excluded(".venv/bin/python") and excluded("var/steelframe.db")
    assert excluded("bot/__pycache__/config.cpython-311.pyc")
    assert not excluded("bot/config.py") and not excluded("pyproject.toml")


def test_every_env_file_compose_reads_stays_out_of_the_build_context() -> None:
    """deploy/datastores.env (the PostgreSQL and Redis passwords) once went to the builder
    with every `docker compose up --build`; deploy/steelframe.env did not."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    env_files: set[str] = set()
    for service in compose["services"].values():
        named = service.get("env_file", [])
        env_files.update([named] if isinstance(named, str) else named)
    assert {"deploy/steelframe.env", "deploy/datastores.env"} <= env_files
    assert [path for path in sorted(env_files) if not excluded(path)] == []


def test_the_secrets_the_docs_have_written_here_stay_out_of_the_build_context() -> None:
    # `github register` writes .env (and, given --key-dir ., the key); Probot-style
    # `.env.production` and a local steelframe.toml hold secrets as well (.gitignore).
    written = [".env", ".env.production", "app-key.pem", "steelframe.toml"]
    assert [path for path in written if not excluded(path)] == []
    # The examples are no secret, and the sources the Dockerfile copies must stay in.
    assert not excluded("deploy/steelframe.env.example") and not excluded("app.yml")
