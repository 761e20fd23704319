"""A root worker's runs each hold a uid of their own (`bot.lifecycle.sandbox_uid`): one
flock'd file per uid, let go by `release` or by the kernel when the holder dies; a uid
something still runs as is passed over; what runs as a uid when its run ends is killed.
Real processes, real locks, real bubblewrap."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.lifecycle import sandbox_uid
from bot.lifecycle.sandbox import Network, SandboxPolicy, SandboxRun
from bot.lifecycle.setup_process import run_command
from tests.fakes.patience import PATIENCE_SECONDS
from tests.fakes.sandbox import exchange_dir, own_uids, require_bwrap, require_root

# Takes a uid of the range given and says which; then holds it until killed.
HOLDER = r"""
import sys, time
from pathlib import Path
from bot.config_values import UidRange
from bot.lifecycle import sandbox_uid
held = sandbox_uid.lease(UidRange(int(sys.argv[1]), int(sys.argv[2])), Path(sys.argv[3]))
print(held.user.uid, flush=True)
time.sleep(600)
"""


@pytest.fixture(autouse=True)
def root() -> None:
    require_root()


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return tmp_path / "locks"


@pytest.fixture
def sleeper_as() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started with `setpriv` as some uid, killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def run_as(uid: int, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A process of `uid`, once it is that uid (setpriv's line says so)."""
    setpriv = ["setpriv", f"--reuid={uid}", "--regid=65534", "--clear-groups"]
    shell = "echo ready; exec sleep 600"
    process = subprocess.Popen([*setpriv, "sh", "-c", shell], stdout=subprocess.PIPE)
    started.append(process)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    return process


def test_a_held_uid_is_not_given_twice_and_a_full_range_falls_back_to_nobody(
    locks: Path,
) -> None:
    uids = own_uids(1)
    first = sandbox_uid.lease(uids, locks)
    try:
        second = sandbox_uid.lease(uids, locks)
        assert first.user.own and first.user.uid == uids.start
        assert not second.user.own and second.user.uid == sandbox_uid.NOBODY
        assert f"all 1 uids of STEELFRAME_SANDBOX_UID_RANGE={uids} are in use" in second.user.note
    finally:
        first.release()
    again = sandbox_uid.lease(uids, locks)
    again.release()
    assert again.user.uid == uids.start


def test_the_range_status_says_which_uids_runs_can_get_or_why_none(
    locks: Path, tmp_path: Path
) -> None:
    """What /readyz and doctor report (bot.serving_checks), and what `lease` starts from."""
    uids = own_uids(3)
    assert sandbox_uid.range_status(uids, locks) == sandbox_uid.RangeStatus(tuple(uids))
    assert locks.is_dir()
    assert sandbox_uid.range_status(None, locks).problem == "STEELFRAME_SANDBOX_UID_RANGE=off"
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    found = sandbox_uid.range_status(uids, not_a_folder / "locks")
    assert found.usable == ()
    assert found.problem == f"the uid locks' folder {not_a_folder / 'locks'} (Not a directory)"
    held = sandbox_uid.lease(uids, not_a_folder / "locks")
    assert not held.held and held.user.note.endswith(f"as every run: {found.problem}")


def test_a_holder_that_dies_lets_its_uid_go(locks: Path) -> None:
    uids = own_uids(1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(uids.start), str(uids.end), str(locks)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == f"{uids.start}\n".encode()
        assert sandbox_uid.lease(uids, locks).user.uid == sandbox_uid.NOBODY  # held
    finally:
        holder.kill()  # no release: the kernel drops the lock with the process
        holder.wait()
    after = sandbox_uid.lease(uids, locks)
    after.release()
    assert after.user.uid == uids.start


def test_a_uid_something_runs_as_is_passed_over(
    locks: Path, sleeper_as: list[subprocess.Popen[bytes]]
) -> None:
    """A dead worker's run may still be dying as its uid (its lock already gone)."""
    uids = own_uids(2)
    run_as(uids.start, sleeper_as)
    held = sandbox_uid.lease(uids, locks)
    held.release()
    assert held.user.uid == uids.end


def test_what_still_runs_as_a_runs_uid_is_killed_when_it_lets_go(
    locks: Path, sleeper_as: list[subprocess.Popen[bytes]]
) -> None:
    uids = own_uids(1)
    held = sandbox_uid.lease(uids, locks)
    left = run_as(held.user.uid, sleeper_as)  # a daemon the run left behind
    held.release()
    assert left.wait(timeout=PATIENCE_SECONDS) == -9
    assert held.user.uid not in sandbox_uid.running_uids()


async def test_a_runs_own_uid_has_a_name_and_its_files_in_its_places(
    tmp_path: Path, locks: Path
) -> None:
    """git, Node's os.userInfo() and getpass look the user up: the uid has an entry in the
    sandbox's /etc/passwd; the repository copy and /tmp are the run's to write."""
    require_bwrap()
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "kept.txt").write_text("from the worker\n")
    run = SandboxRun(repo=tmp_path / "repo", tmp=tmp_path / "tmp", prompt=tmp_path / "p.md")
    policy = SandboxPolicy(
        network=Network.OFF, uid_range=own_uids(1), uid_locks=locks, max_processes=64
    )
    script = "id -un; echo more >> kept.txt; echo new > made.txt; echo t > /tmp/t; cat kept.txt"
    result = await run_command(policy, run, script, {}, time_limit=60)
    assert result.passed, result.tail
    assert result.tail.splitlines() == [sandbox_uid.PASSWD_NAME, "from the worker", "more"]
    made = tmp_path / "repo" / "made.txt"
    assert (made.stat().st_uid, made.stat().st_gid) == (own_uids(1).start, sandbox_uid.RUN_GROUP)


async def test_what_a_run_leaves_in_a_shared_writable_path_the_next_uid_may_write(
    tmp_path: Path, locks: Path
) -> None:
    """A task's runs may get different uids (the lowest free one each time): what one left
    in an extra writable path (an agent's cache) stays writable by the next, as when both
    were nobody (same group, umask 002)."""
    require_bwrap()
    uids = own_uids(2)
    shared = exchange_dir(tmp_path)

    async def run(name: str, script: str) -> str:
        folder = tmp_path / name
        (folder / "repo").mkdir(parents=True)
        place = SandboxRun(repo=folder / "repo", tmp=folder / "tmp", prompt=folder / "p.md")
        policy = SandboxPolicy(
            network=Network.OFF, uid_range=uids, uid_locks=locks, writable=(shared,)
        )
        result = await run_command(policy, place, script, {}, time_limit=60)
        assert result.passed, result.tail
        return result.tail

    first = sandbox_uid.lease(uids, locks)  # the first run gets the second uid
    try:
        assert await run("a", f"mkdir {shared}/cache && echo a > {shared}/cache/log; id -u") == (
            str(uids.end)
        )
    finally:
        first.release()
    later = f"echo b >> {shared}/cache/log && echo c > {shared}/cache/new; id -u"
    assert await run("b", later) == str(uids.start)
    assert (shared / "cache" / "log").read_text() == "a\nb\n"


def test_a_range_the_workers_user_namespace_does_not_map_falls_back_to_nobody(
    locks: Path,
) -> None:
    """A root worker in a rootless container maps few uids: one outside them cannot be set
    (setpriv would fail), so the run is nobody and its log says why."""
    uids = own_uids(1)
    asks = (
        "from pathlib import Path; from bot.config_values import UidRange; "
        "from bot.lifecycle.sandbox_uid import lease; "
        f"held = lease(UidRange({uids.start}, {uids.end}), Path({str(locks)!r})); "
        "print(held.user.uid, held.held); print(held.user.note)"
    )
    # A user namespace that maps root alone, as this process's uid.
    said = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", asks],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert said[0] == f"{sandbox_uid.NOBODY} False"
    assert f"no uid of STEELFRAME_SANDBOX_UID_RANGE={uids} exists in this user namespace" in said[1]
    assert not locks.exists()
