"""Per-installation pacing of content-creating requests (GitHub's REST best practices),
in one process and shared through Redis by every process of a deployment."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.github.client import GitHubClient
from bot.github.pacing import Ledger, LocalLedger, Pacer, PacingPolicy
from bot.github.shared_pacing import RedisLedger
from tests.conftest import SANDBOX_REPO, FakeTime, GitHubSandbox
from tests.fakes.ports import refused_port

MakeLedger = Callable[[], Ledger]


@pytest.fixture(params=["local", "redis"])
async def ledgers(request: pytest.FixtureRequest) -> AsyncIterator[MakeLedger]:
    """Ledgers of one kind; Redis ones made by one call share one prefix (one deployment)."""
    made: list[Ledger] = []
    local = LocalLedger()
    prefix = f"test-pacing:{uuid.uuid4().hex[:8]}"

    def make() -> Ledger:
        if request.param == "local":
            return local
        ledger = RedisLedger.from_url(request.getfixturevalue("redis_url"), prefix=prefix)
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        await ledger.close()


def pacer_for(policy: PacingPolicy, clock: FakeTime, ledger: Ledger) -> Pacer:
    return Pacer(policy, clock=clock.clock, sleep=clock.sleep, ledger=ledger)


async def send(pacer: Pacer, key: int, method: str, times: list[float], clock: FakeTime) -> None:
    async with pacer.slot(key, method):
        times.append(clock.now)


async def test_writes_are_spaced_by_the_minimum_interval(
    fake_time: FakeTime, ledgers: MakeLedger
) -> None:
    pacer = pacer_for(PacingPolicy(min_interval=1.0), fake_time, ledgers())
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


async def test_reads_and_other_installations_are_not_held_back(
    fake_time: FakeTime, ledgers: MakeLedger
) -> None:
    pacer = pacer_for(PacingPolicy(min_interval=5.0), fake_time, ledgers())
    times: list[float] = []
    await send(pacer, 1, "POST", times, fake_time)
    await send(pacer, 1, "GET", times, fake_time)
    await send(pacer, 2, "POST", times, fake_time)
    assert fake_time.sleeps == []


async def test_no_more_than_80_writes_a_minute(fake_time: FakeTime, ledgers: MakeLedger) -> None:
    pacer = pacer_for(PacingPolicy(min_interval=0.0), fake_time, ledgers())
    start = fake_time.now
    times: list[float] = []
    for _ in range(81):
        await send(pacer, 1, "POST", times, fake_time)
    assert times[79] == start and times[80] == pytest.approx(start + 60.0)


async def test_no_more_than_500_writes_an_hour(fake_time: FakeTime, ledgers: MakeLedger) -> None:
    policy = PacingPolicy(min_interval=0.0, per_minute=10_000)
    pacer = pacer_for(policy, fake_time, ledgers())
    start = fake_time.now
    times: list[float] = []
    for _ in range(501):
        await send(pacer, 1, "DELETE", times, fake_time)
    assert times[499] == start and times[500] == pytest.approx(start + 3600.0)


async def test_a_rate_limit_block_holds_reads_and_writes(
    fake_time: FakeTime, ledgers: MakeLedger
) -> None:
    pacer = pacer_for(PacingPolicy(min_interval=0.0), fake_time, ledgers())
    start = fake_time.now
    await pacer.block_until(1, start + 30)
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
    await client.get_issue(SANDBOX_REPO, issue.number)
    await asyncio.gather(
        client.create_comment(SANDBOX_REPO, issue.number, "one"),
        client.create_comment(SANDBOX_REPO, issue.number, "two"),
    )
    assert sorted(fake_time.sleeps) == pytest.approx([1.0, 1.0])


async def test_processes_sharing_redis_share_one_budget_per_installation(
    fake_time: FakeTime, redis_url: str
) -> None:
    prefix = f"test-pacing:{uuid.uuid4().hex[:8]}"
    ledgers = [RedisLedger.from_url(redis_url, prefix=prefix) for _ in range(2)]
    try:
        # Two processes (two pacers, two connections), one installation.
        one, two = (pacer_for(PacingPolicy(min_interval=0.0), fake_time, x) for x in ledgers)
        start = fake_time.now
        times: list[float] = []
        for n in range(80):
            await send(one if n % 2 else two, 7, "POST", times, fake_time)
        await send(one, 9, "POST", times, fake_time)  # another installation: its own budget
        assert fake_time.sleeps == []
        await send(two, 7, "POST", times, fake_time)  # the 81st of installation 7 this minute
        assert times[-1] == pytest.approx(start + 60.0)
        # A rate-limit block seen by one process holds the other's requests too.
        await one.block_until(7, fake_time.now + 30)
        before = fake_time.now
        await send(two, 7, "GET", times, fake_time)
        assert times[-1] == pytest.approx(before + 30)
    finally:
        for ledger in ledgers:
            await ledger.close()


async def test_clients_built_from_settings_with_redis_pace_through_it(
    github_sandbox: GitHubSandbox, redis_url: str, tmp_path: Path
) -> None:
    settings = github_sandbox.settings(tmp_path, redis_url=redis_url, github_write_interval=5.0)
    first = GitHubClient.from_settings(settings)
    second = GitHubClient.from_settings(settings)
    try:
        assert isinstance(first.pacer.ledger, RedisLedger)
        issue = await first.create_issue(SANDBOX_REPO, title="t", body="b", labels=[])
        installation = await first.installation_id(SANDBOX_REPO)
        # The second client (another process) must wait out the first one's write.
        wait = await second.pacer.ledger.reserve(installation, time.time(), second.pacer.policy)
        assert 0 < wait <= 5.0
        assert issue.number > 0
    finally:
        await first.close()
        await second.close()


async def test_with_redis_unreachable_each_process_paces_alone(fake_time: FakeTime) -> None:
    ledger = RedisLedger.from_url(f"redis://127.0.0.1:{refused_port()}/0")
    try:
        pacer = pacer_for(PacingPolicy(min_interval=2.0), fake_time, ledger)
        start = fake_time.now
        times: list[float] = []
        await pacer.block_until(1, start + 5)
        for _ in range(2):
            await send(pacer, 1, "POST", times, fake_time)
        assert [t - start for t in times] == [5.0, 7.0]
    finally:
        await ledger.close()
