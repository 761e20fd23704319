"""The largest change a run may push: measured by git, never read into the worker. Over
the limit nothing is pushed and the task fails with one line naming the file and size."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.lifecycle.push_limit import ChangeSize, PushLimits, refusal, sized
from bot.lifecycle.push_scan import history_holds
from bot.lifecycle.redact import Redactor
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import committed_over_base
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

MIB = 1024 * 1024


def _status(field: str) -> int:
    """A `VmHWM`/`VmRSS` line of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from VmRSS (Linux 4.0+)


async def test_a_file_over_the_limit_is_not_pushed_and_never_read_into_the_worker(
    make: Make,
) -> None:
    lc = await make(
        coding_command=command("large", f"data/big.bin:{64 * MIB}"),
        push_max_file_bytes=MIB,
        push_max_bytes=2 * MIB,
    )
    issue = await lc.open_issue()
    # The in-process worker runs on a thread of this process: its peak memory is ours. Had
    # anything read the 64 MiB file (or its patch) into Python, the peak would rise by more.
    _reset_peak()
    before = _status("VmRSS")
    await lc.work()
    grown = _status("VmHWM") - before
    task = lc.task(issue)
    reason = "the change was not pushed: data/big.bin is 64.0 MiB, over the limit of 1.0 MiB"
    assert task.state == TaskState.FAILED and task.attempts == 1  # not retried
    assert task.last_error == f"{reason} for one file"
    assert lc.branch_file("data/big.bin", f"steelframe/issue-{issue}") is None
    assert await lc.pulls() == []
    assert any(reason in c["body"] for c in await lc.comments(issue))
    assert grown < 32 * MIB, f"the worker grew by {grown / MIB:.0f} MiB"


async def test_many_files_over_the_total_are_not_pushed(make: Make) -> None:
    files = [f"part{n}.bin:{MIB - n}" for n in range(3)]  # three blobs: sizes differ
    lc = await make(
        coding_command=command("large", *files), push_max_file_bytes=MIB, push_max_bytes=2 * MIB
    )
    issue = await lc.open_issue()
    await lc.work()
    task = lc.task(issue)
    assert task.state == TaskState.FAILED
    assert task.last_error == (
        "the change was not pushed: its 3 files come to 3.0 MiB, over the limit of 2.0 MiB "
        "(the largest: part0.bin, 1.0 MiB)"
    )
    assert lc.branch_file("part0.bin", f"steelframe/issue-{issue}") is None


async def test_a_change_within_the_limits_is_delivered(make: Make) -> None:
    lc = await make(
        coding_command=command("large", f"data/ok.bin:{MIB // 2}"), push_max_file_bytes=MIB
    )
    issue = await lc.open_issue()
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    assert lc.branch_file("data/ok.bin", f"steelframe/issue-{issue}") == "\0" * (MIB // 2)


async def test_a_large_change_within_the_limits_is_pushed_with_flat_memory(make: Make) -> None:
    """Under the limit the secret check reads the whole patch, as git writes it, a chunk at
    a time: a 64 MiB file goes out and the worker's peak memory stays where it was."""
    lc = await make(
        coding_command=command("large", f"data/big.bin:{64 * MIB}"),
        push_max_file_bytes=128 * MIB,
        push_max_bytes=128 * MIB,
    )
    issue = await lc.open_issue()
    _reset_peak()
    before = _status("VmRSS")
    await lc.work()
    grown = _status("VmHWM") - before
    assert lc.task(issue).state == TaskState.DELIVERED
    assert grown < 32 * MIB, f"the worker grew by {grown / MIB:.0f} MiB"


@pytest.mark.parametrize("offset", range(0, 40, 3))
async def test_a_secret_cut_by_a_chunk_boundary_is_still_found(tmp_path: Path, offset: int) -> None:
    secret = "sk-secret-0123456789abcdef"
    text = "x" * offset + secret + "\n" + "y" * 500
    tree = committed_over_base(tmp_path, "notes.txt", text)
    redactor = Redactor([secret])
    found = redactor.contains_secret
    overlap = redactor.longest_value
    assert await history_holds(tree, found, overlap=overlap, chunk=16)
    assert not await history_holds(
        tree, Redactor(["not-in-it-at-all"]).contains_secret, overlap=16, chunk=16
    )


def test_git_batch_check_lines_are_summed_by_blob() -> None:
    lines = "\n".join(
        [
            "commit 250 ",
            "tree 90 ",
            "tree 40 docs",
            "blob 12 docs/a file with spaces.md",
            "blob 3000 big.bin",
            "blob 7 b",
        ]
    )
    size = sized(lines)
    assert size == ChangeSize(total=3019, files=3, largest=3000, largest_path="big.bin")
    assert refusal(size, PushLimits(max_bytes=4000, max_file_bytes=3000)) is None
    assert refusal(size, PushLimits(max_bytes=3018, max_file_bytes=3000)) is not None
    assert refusal(sized(""), PushLimits(max_bytes=1, max_file_bytes=1)) is None
