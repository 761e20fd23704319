"""Dev stays dev: in a shell configured for production, `steelframe dev` keeps its own data
folder, database and Redis (unless --use-configured-services), and the token it prints opens
nothing on a service that is not dev. The token survives a dev restart."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import redis

from bot.operators import create_operator
from steelframe.dev import TOKEN_FILE, dev_token
from steelframe.dev_tokens import DEV_TOKEN_PREFIX, REFUSED
from tests.conftest import make_settings
from tests.fakes.dev_process import dev_up_to_its_token, production_shell


def _running_in(folder: Path) -> list[str]:
    """The processes whose working directory is `folder` (redis-server runs in its --dir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(proc / "cwd")) == folder:
                    found.append((proc / "cmdline").read_text().replace("\0", " "))
    return found


def test_dev_in_a_production_shell_keeps_its_own_database_and_redis(
    tmp_path: Path, redis_url: str
) -> None:
    production_db = tmp_path / "production.db"
    with dev_up_to_its_token(tmp_path, production_shell(tmp_path, redis_url)) as dev:
        pass  # stopped as soon as it said its token
    said = "".join(dev.said)
    # Stopped as soon as it said its token, dev stopped its own Redis too (it was left
    # running when the stop came before dev listened for it).
    assert _running_in(tmp_path / "var" / "redis") == [], said
    assert (
        "not using STEELFRAME_DATA_DIR, STEELFRAME_DATABASE_URL, STEELFRAME_REDIS_URL of this "
        "shell" in said
    ), said
    assert f"database: sqlite:///{tmp_path / 'var' / 'steelframe.db'}" in said
    assert not production_db.exists() and not (tmp_path / "production-data").exists()
    assert redis.Redis.from_url(redis_url).dbsize() == 0  # nothing queued on its Redis
    token = said.split("token: ")[1].split()[0]
    assert token.startswith(DEV_TOKEN_PREFIX)


async def test_a_dev_token_is_refused_by_a_service_that_is_not_dev(
    api_factory: Any, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path)
    api = await api_factory(settings)
    token = api.services.db.call(dev_token, tmp_path / "var")
    bearer = {"Authorization": f"Bearer {token}"}
    refused = await api.raw.get("/api/operator/board", headers=bearer)
    assert refused.status == 401
    assert (await refused.json())["error"] == REFUSED
    from steelframe.dev_tokens import DEV_TOKENS_ACCEPTED

    assert api.raw.app[DEV_TOKENS_ACCEPTED] is False  # for the GUI sign-in to read
    # An operator's own token still works on it.
    assert (await api.get("/api/operator/board")).status == 200
    # The same database served by dev accepts it.
    dev = await api_factory(settings, accept_dev_tokens=True)
    board = await dev.raw.get("/api/operator/board", headers=bearer)
    assert board.status == 200 and dev.raw.app[DEV_TOKENS_ACCEPTED] is True


def test_the_dev_token_survives_a_restart_and_is_renewed_once_lost(tmp_path: Path) -> None:
    from bot.db import Database, upgrade

    database = Database.from_url(f"sqlite:///{tmp_path / 'dev.db'}")
    upgrade(database.engine)
    try:
        first = database.call(dev_token, tmp_path)
        assert database.call(dev_token, tmp_path) == first  # an open TUI keeps working
        assert oct((tmp_path / TOKEN_FILE).stat().st_mode & 0o777) == "0o600"
        (tmp_path / TOKEN_FILE).unlink()
        second = database.call(dev_token, tmp_path)
        assert second != first and second.startswith(DEV_TOKEN_PREFIX)
        # A kept token that no longer matches (rotated elsewhere) is replaced, not trusted.
        (tmp_path / TOKEN_FILE).write_text(DEV_TOKEN_PREFIX + "forged\n")
        assert database.call(dev_token, tmp_path) not in (second, DEV_TOKEN_PREFIX + "forged")
        database.call(create_operator, "someone")  # other operators are untouched
    finally:
        database.dispose()
