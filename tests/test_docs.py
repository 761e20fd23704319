"""Docs stay true: every setting documented, every route in the API doc."""

from __future__ import annotations

from pathlib import Path

from bot.config import FIELDS

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_is_documented() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [field.env for field in FIELDS if f"`{field.env}`" not in text]
    assert missing == []


def test_every_operator_route_is_in_the_api_doc() -> None:
    from operator_api import chat_routes, decision_routes

    text = (ROOT / "docs" / "api.md").read_text()
    declared = [*chat_routes.endpoints.paths, *decision_routes.endpoints.paths]
    paths = [p for p in declared if p.startswith("/api/operator/chat")]
    missing = [p for p in paths if f"`{p.replace('{session}', '{id}')}`" not in text]
    assert missing == []
