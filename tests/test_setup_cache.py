"""The setup cache: per repository, keyed by setup and key files, written atomically,
bounded to the newest entries."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from bot.lifecycle.repo_config import parse
from bot.lifecycle.setup_cache import PARTIAL, SetupCache, TreeEntry, cache_key

REPO = "acme/web"


def _made(root: Path, stamp: str) -> Path:
    (root / "node_modules" / "left-pad").mkdir(parents=True)
    (root / "node_modules" / "left-pad" / "index.js").write_text(stamp)
    (root / "node_modules" / ".bin").mkdir()
    os.symlink("../left-pad/index.js", root / "node_modules" / ".bin" / "left-pad")
    return root


def test_the_key_follows_the_setup_commands_and_key_file_contents_only() -> None:
    config = parse("setup: [npm ci]")
    tree = [TreeEntry("package-lock.json", "a" * 40), TreeEntry("src/app.js", "b" * 40)]
    key = cache_key(config, tree)
    assert cache_key(config, [tree[0], TreeEntry("src/app.js", "c" * 40)]) == key
    assert cache_key(config, [TreeEntry("package-lock.json", "d" * 40), tree[1]]) != key
    assert cache_key(parse("setup: [npm install]"), tree) != key
    assert cache_key(config, [*tree, TreeEntry("api/requirements.txt", "e" * 40)]) != key


def test_a_kept_workspace_is_restored_for_its_repository_only(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=3)
    source = _made(tmp_path / "setup", "v1")
    assert cache.store(REPO, "k1", source, ["node_modules"])
    assert cache.lookup("acme/other", "k1") is None
    entry = cache.lookup(REPO, "k1")
    assert entry is not None
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    restored = cache.restore(entry, checkout)
    assert restored.paths == ["node_modules"]
    assert (checkout / "node_modules" / "left-pad" / "index.js").read_text() == "v1"
    assert (checkout / "node_modules" / ".bin" / "left-pad").is_symlink()
    # A copy: the agent changing its checkout never changes the kept entry.
    (checkout / "node_modules" / "left-pad" / "index.js").write_text("poisoned")
    assert (entry / "files" / "node_modules" / "left-pad" / "index.js").read_text() == "v1"


def test_a_path_the_checkout_has_is_left_as_it_is(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=3)
    cache.store(REPO, "k1", _made(tmp_path / "setup", "v1"), ["node_modules"])
    checkout = tmp_path / "checkout"
    (checkout / "node_modules").mkdir(parents=True)
    entry = cache.lookup(REPO, "k1")
    assert entry is not None
    assert cache.restore(entry, checkout).paths == []
    assert list((checkout / "node_modules").iterdir()) == []


def test_a_half_written_entry_is_never_used_and_stale_ones_are_removed(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=3)
    folder = cache.folder(REPO)
    crashed = folder / f"{PARTIAL}dead"
    (crashed / "files").mkdir(parents=True)
    (crashed / "meta.json").write_text(json.dumps({"paths": []}))
    assert cache.lookup(REPO, "dead") is None
    old = time.time() - 7200
    os.utime(crashed, (old, old))
    cache.store(REPO, "k1", _made(tmp_path / "setup", "v1"), ["node_modules"])
    assert not crashed.exists()
    assert [p.name for p in folder.iterdir()] == ["k1"]


def test_only_the_newest_entries_are_kept_and_a_restore_counts_as_use(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=2)
    for number, key in enumerate(("k1", "k2")):
        cache.store(REPO, key, _made(tmp_path / f"setup-{key}", key), ["node_modules"])
        stamp = time.time() - 100 + number
        os.utime(cache.folder(REPO) / key, (stamp, stamp))
    assert cache.lookup(REPO, "k1") is not None  # used now: newer than k2
    cache.store(REPO, "k3", _made(tmp_path / "setup-k3", "k3"), ["node_modules"])
    assert sorted(p.name for p in cache.folder(REPO).iterdir()) == ["k1", "k3"]


def test_the_same_key_stored_twice_keeps_the_first_whole(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=3)
    assert cache.store(REPO, "k1", _made(tmp_path / "a", "first"), ["node_modules"])
    assert not cache.store(REPO, "k1", _made(tmp_path / "b", "second"), ["node_modules"])
    entry = cache.lookup(REPO, "k1")
    assert entry is not None
    assert (entry / "files/node_modules/left-pad/index.js").read_text() == "first"
    assert [p.name for p in cache.folder(REPO).iterdir()] == ["k1"]


def test_keep_zero_turns_the_cache_off(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=0)
    assert not cache.store(REPO, "k1", _made(tmp_path / "setup", "v1"), ["node_modules"])
    assert cache.lookup(REPO, "k1") is None


def test_nothing_is_restored_through_a_link_a_branch_planted(tmp_path: Path) -> None:
    cache = SetupCache(tmp_path / "cache", keep=3)
    source = tmp_path / "setup"
    (source / "web" / "node_modules").mkdir(parents=True)
    (source / "web" / "node_modules" / "x.js").write_text("x")
    cache.store(REPO, "k1", source, ["web/node_modules"])
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    checkout.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, checkout / "web")  # an earlier run's branch made `web` a link
    entry = cache.lookup(REPO, "k1")
    assert entry is not None
    assert cache.restore(entry, checkout).paths == []
    assert list(elsewhere.iterdir()) == []
