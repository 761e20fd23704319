"""Without Chromium the browser tests say they did not run; under CI=true they fail."""

from __future__ import annotations

import pytest

from tests.browser.conftest import chromium_path


def test_no_chromium_is_a_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.skip.Exception, match="browser tests did not run"):
        chromium_path("/nonexistent/chromium")


def test_no_chromium_under_ci_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match="must be installed in CI"):
        chromium_path("/nonexistent/chromium")
