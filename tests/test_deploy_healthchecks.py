"""compose.yaml's healthchecks can fail when what they guard is not there yet: `depends_on:
service_healthy` releases serve and the workers on them."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _test_words(service: str) -> list[str]:
    test = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"][service]["healthcheck"]
    words = test["test"]
    return shlex.split(words[1]) if words[0] == "CMD-SHELL" else list(words[1:])


def test_postgres_is_healthy_only_once_it_listens_on_its_port() -> None:
    """On a fresh volume the postgres image first runs a temporary server that listens on
    its Unix socket only (listen_addresses='') while it creates the role and database; a
    `pg_isready` without a host asks that socket and says ready, compose starts serve and
    the workers, and each exits with "cannot use the database ... Connection refused" until
    its restart. Asked over TCP, pg_isready answers only once the real server listens."""
    words = _test_words("postgres")
    assert words[0] == "pg_isready"
    hosts = [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-h", "--host")] + [
        word.split("=", 1)[1] for word in words if word.startswith("--host=")
    ]
    assert hosts == ["127.0.0.1"], words
