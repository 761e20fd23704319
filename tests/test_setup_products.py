"""What a repository's setup made stays out of every commit, whatever its names (a name
with a line break cannot be written as one gitignore line). Real service, GitHub sandbox,
RQ worker, bubblewrap."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import commit_files
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.sandbox import require_bwrap


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


async def test_setup_products_with_line_breaks_in_their_names_are_never_pushed(
    make: Make,
) -> None:
    lc = await make(coding_command=command("commit"))
    setup = (
        "setup:\n"
        "  - printf built > \"$(printf 'odd\\nname.txt')\"\n"
        "  - mkdir -p \"$(printf 'deps\\r')\" && printf lib > \"$(printf 'deps\\r')/lib.js\"\n"
        "  - printf plain > plain.txt\n"
    )
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, {".steelframe/config.yml": setup})
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.DELIVERED, [e.detail for e in lc.events(task.id)]
    tree = lc.branch_file("", f"steelframe/issue-{issue}") or ""
    # The agent's change is there; nothing setup made is.
    assert "plain.txt" not in tree
    assert "odd" not in tree and "name.txt" not in tree and "deps" not in tree, tree


async def test_a_padded_secret_written_trimmed_by_setup_is_still_found(
    make: Make, tmp_path: Path
) -> None:
    value = "sfsetupsecret-" + secrets.token_hex(12)
    store = tmp_path / "setup-secrets"
    (store / "steelframe-dev").mkdir(parents=True)
    # Stored with spaces around it (quoted in the dotenv file): the shell trims them.
    (store / "steelframe-dev" / "sandbox.env").write_text(f'NPM_TOKEN="  {value} "\n')
    lc = await make(coding_command=command("commit"), setup_secrets_dir=store)
    setup = (
        "setup:\n"
        "  - mkdir -p .deps && printf '%s' $NPM_TOKEN > .deps/token\n"
        "setup_secrets: [NPM_TOKEN]\n"
    )
    commit_files(lc.sandbox.sandbox.world.repo(lc.repo).git_path, {".steelframe/config.yml": setup})
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    # Found as the redactor finds it: the run stops before the agent, nothing kept.
    assert task.state == TaskState.FAILED, task.state
    assert "setup was refused by the worker" in (task.last_error or "")
    cache = lc.settings.data_dir / "setup-cache" / "steelframe-dev" / "sandbox"
    assert not cache.is_dir() or all(p.name.startswith(".") for p in cache.iterdir())
