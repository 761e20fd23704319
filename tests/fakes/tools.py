"""Machine tools some tests need (docker-compose, bwrap, chromium): present, or the test
says it did not run and why; under CI=true a missing tool fails instead (.ci/run installs
them from Debian's packages)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    message = f"{name} is not installed (Debian package `{package}`)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: CI must run these tests; .ci/run installs it")
    pytest.skip(f"did not run: {message}")
