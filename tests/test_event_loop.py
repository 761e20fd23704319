"""`serve --loop`: uvloop when installed, asyncio's own loop on request or without it."""

from __future__ import annotations

import asyncio
import sys

import pytest

from steelframe import event_loop


def test_asyncio_is_asyncios_own_loop() -> None:
    assert event_loop.loop_factory("asyncio") is None


def test_auto_uses_uvloop_when_installed() -> None:
    uvloop = event_loop.uvloop
    if uvloop is None:
        if sys.platform == "win32":
            pytest.skip("uvloop does not exist on Windows")
        pytest.fail("the dev install has uvloop everywhere but Windows: pip install -e '.[dev]'")
    factory = event_loop.loop_factory("auto")
    assert factory is uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
        assert runner.run(asyncio.sleep(0, result=7)) == 7


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(event_loop, "uvloop", None)  # as on Windows
    assert event_loop.loop_factory("auto") is None
    with pytest.raises(event_loop.LoopUnavailable, match="not installed"):
        event_loop.loop_factory("uvloop")
