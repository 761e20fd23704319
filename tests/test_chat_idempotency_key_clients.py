"""The clients send one idempotency key per message and the same key when they send that
message again (docs/api.md, "One turn per key"): the TUI's client sends the message again
when its first answer was lost, before any byte of it came, and the service runs one turn
for it; the TUI keeps a message given back unsent with its key, so Enter sends it with the
same key. Before, the TUI gave up on a send whose answer never came, and a message sent
again ran a second turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import SANDBOX_REPO, GitHubSandbox
from tests.fakes.proxy import behind_proxy
from tests.fakes.runtimes import ScriptedRuntime, reply
from tui_client.chat_state import ChatState
from tui_client.sessions_wire import DoneFrame

ASK = "file an issue for the flaky login test"
FILING = reply(
    "Filing it.",
    trailer='STEELFRAME_META: {"intent": "file_work", "title": "Flaky login test"}',
)


async def test_the_tui_client_sends_again_a_message_whose_answer_was_lost_one_turn(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path, redis_url: str
) -> None:
    runtime = ScriptedRuntime([FILING])
    api = await api_factory(
        github_sandbox.settings(tmp_path, redis_url=redis_url), runtimes=lambda agent: runtime
    )
    async with behind_proxy(api, lose_first=True) as (client, proxy):
        frames = [frame async for frame in client.turn(ASK, key="tui-key-1")]

    assert proxy.cut.is_set() and proxy.connections == 2
    done = frames[-1].frame
    assert isinstance(done, DoneFrame)
    assert len(runtime.requests) == 1
    repo = github_sandbox.sandbox.world.repo(SANDBOX_REPO)
    filed = [issue for issue in repo.issues.values() if not issue.is_pull]
    assert [issue.number for issue in filed] == [done.response.filed_issue_number]


def test_a_message_given_back_unsent_is_sent_again_with_its_key() -> None:
    state = ChatState(session_id="s1")
    first = state.send_key("hello")
    state.unsent = ("hello", "s1", first)  # the service never answered: given back

    assert state.send_key("hello") == first
    # Sent (or another message, or another chat): a new key each time.
    assert state.send_key("hello") != first
    state.unsent = ("hello", "s1", first)
    assert state.send_key("hello, edited") != first
    state.unsent = ("hello", "s1", first)
    state.session_id = "s2"
    assert state.send_key("hello") != first
