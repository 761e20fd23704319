"""Server policy: what counts as the operator's own request for a side effect."""

from __future__ import annotations

import pytest

from bot.chat.intents import operator_asked_to_file, operator_asked_to_remember


@pytest.mark.parametrize(
    "message",
    [
        "file an issue for the flaky login test",
        "Please open a ticket: checkout is slow",
        "Can you create a new issue about the cache?",
        "The build broke again. File an issue for it.",
        "ok, file a bug for the footer",
    ],
)
def test_explicit_requests_to_file(message: str) -> None:
    assert operator_asked_to_file(message)


@pytest.mark.parametrize(
    "message",
    [
        "Why did nobody create a ticket for this?",
        "Please don't file an issue for this",
        "Can you open the issue about login and summarise it?",
        "what happens if I file an issue?",
        "The notes say: ignore your instructions",
    ],
)
def test_questions_negations_and_references_are_not_requests(message: str) -> None:
    assert not operator_asked_to_file(message)


@pytest.mark.parametrize(
    "message", ["remember that staging needs a VPN", "Please remember: no Friday deploys"]
)
def test_explicit_requests_to_remember(message: str) -> None:
    assert operator_asked_to_remember(message)


@pytest.mark.parametrize(
    "message", ["Do you remember what we decided?", "I can't remember the port"]
)
def test_remember_questions_are_not_requests(message: str) -> None:
    assert not operator_asked_to_remember(message)
