"""Per-installation pacing of content-creating requests (GitHub's REST best practices)."""

from __future__ import annotations

import asyncio

import pytest

from bot.github.pacing import Pacer, PacingPolicy
from tests.conftest import SANDBOX_REPO, FakeTime, GitHubSandbox


async def send(pacer: Pacer, key: int, method: str, times: list[float], clock: FakeTime) -> None:
    async with pacer.slot(key, method):
        times.append(clock.now)


async def test_writes_are_spaced_by_the_minimum_interval(fake_time: FakeTime) -> None:
    pacer = Pacer(PacingPolicy(min_interval=1.0), clock=fake_time.clock, sleep=fake_time.sleep)
    start = fake_time.now
    times: list[float] = []
    for _ in range(3):
        await send(pacer, 1, "POST", times, fake_time)
    assert [t - start for t in times] == [0.0, 1.0, 2.0]


async def test_concurrent_writes_of_one_installation_go_one_at_a_time(
    fake_time: FakeTime,
) -> None:
    pacer = Pacer(PacingPolicy(min_interval=0.0), clock=fake_time.clock, sleep=fake_time.sleep)
    inside = 0
    most = 0

    async def write() -> None:
        nonlocal inside, most
        async with pacer.slot(1, "PATCH"):
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            inside -= 1

    await asyncio.gather(*[write() for _ in range(8)])
    assert most == 1


async def test_reads_and_other_installations_are_not_held_back(fake_time: FakeTime) -> None:
    pacer = Pacer(PacingPolicy(min_interval=5.0), clock=fake_time.clock, sleep=fake_time.sleep)
    times: list[float] = []
    await send(pacer, 1, "POST", times, fake_time)
    await send(pacer, 1, "GET", times, fake_time)
    await send(pacer, 2, "POST", times, fake_time)
    assert fake_time.sleeps == []


async def test_no_more_than_80_writes_a_minute(fake_time: FakeTime) -> None:
    pacer = Pacer(PacingPolicy(min_interval=0.0), clock=fake_time.clock, sleep=fake_time.sleep)
    start = fake_time.now
    times: list[float] = []
    for _ in range(81):
        await send(pacer, 1, "POST", times, fake_time)
    assert times[79] == start and times[80] == pytest.approx(start + 60.0)


async def test_no_more_than_500_writes_an_hour(fake_time: FakeTime) -> None:
    policy = PacingPolicy(min_interval=0.0, per_minute=10_000)
    pacer = Pacer(policy, clock=fake_time.clock, sleep=fake_time.sleep)
    start = fake_time.now
    times: list[float] = []
    for _ in range(501):
        await send(pacer, 1, "DELETE", times, fake_time)
    assert times[499] == start and times[500] == pytest.approx(start + 3600.0)


async def test_a_rate_limit_block_holds_reads_and_writes(fake_time: FakeTime) -> None:
    pacer = Pacer(PacingPolicy(min_interval=0.0), clock=fake_time.clock, sleep=fake_time.sleep)
    start = fake_time.now
    pacer.block_until(1, start + 30)
    times: list[float] = []
    await send(pacer, 1, "GET", times, fake_time)
    await send(pacer, 1, "POST", times, fake_time)
    await send(pacer, 2, "POST", times, fake_time)
    assert [t - start for t in times] == [30.0, 30.0, 30.0]


async def test_the_client_spaces_its_writes_per_installation(
    github_sandbox: GitHubSandbox, fake_time: FakeTime
) -> None:
    github_sandbox.use_clock(fake_time.clock)
    client = github_sandbox.client(
        clock=fake_time.clock, sleep=fake_time.sleep, pacing=PacingPolicy(min_interval=1.0)
    )
    issue = await client.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
    await client.get_issue(SANDBOX_REPO, issue["number"])
    await asyncio.gather(
        client.create_comment(SANDBOX_REPO, issue["number"], "one"),
        client.create_comment(SANDBOX_REPO, issue["number"], "two"),
    )
    assert sorted(fake_time.sleeps) == pytest.approx([1.0, 1.0])
