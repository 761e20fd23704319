"""Typed answers keep their bytes: /healthz, /readyz, a publish and a filing answer with
contract Structs (bot/contracts/health.py, actions.py), encoded as `web.json_response`
encoded the dicts they replaced, and their generated schemas stay exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.decisions import NEEDS_HUMAN_LABEL
from tests.conftest import SANDBOX_REPO, ApiClient, GitHubSandbox


async def _body(response: Any) -> tuple[bytes, Any]:
    raw = await response.read()
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    return raw, json.loads(raw)


def _as_json_response_sent(value: Any) -> bytes:
    """web.json_response's body: json.dumps with its default separators and ASCII escapes."""
    return json.dumps(value).encode()


async def test_health_and_readiness_answers_keep_their_bytes_and_key_order(
    api: ApiClient,
) -> None:
    raw, health = await _body(await api.raw.get("/healthz"))
    assert raw == _as_json_response_sent(health)
    assert list(health) == ["status", "version", "database", "redis", "coding_sandbox"]
    assert list(health["coding_sandbox"]) == ["mode", "network", "warning"]
    answer = await api.raw.get("/readyz")
    raw, ready = await _body(answer)
    assert raw == _as_json_response_sent(ready)
    assert list(ready) == ["status", "checks"] and list(ready["checks"])[:2] == [
        "database",
        "index",
    ]
    assert all(list(check) == ["ok", "detail"] for check in ready["checks"].values())
    assert (answer.status == 200) is (ready["status"] == "ready")


async def test_publish_and_file_answers_keep_their_bytes(
    api_factory: Any, github_sandbox: GitHubSandbox, tmp_path: Path
) -> None:
    api: ApiClient = await api_factory(github_sandbox.settings(tmp_path))
    github = api.services.github
    assert github is not None
    issue = await github.create_issue(SANDBOX_REPO, title="T", body="b", labels=[NEEDS_HUMAN_LABEL])
    for status in (201, 200):  # filed, then the same filing again (same title: same key)
        answer = await api.post("/api/operator/chat/file", json={"title": "caf\u00e9", "body": "b"})
        raw, filed = await _body(answer)
        assert answer.status == status and raw == _as_json_response_sent(filed)
        assert list(filed) == ["filed_issue_number", "filed_issue_url", "filed_task_started"]
    answer = await api.post(
        "/api/operator/chat/decision", json={"issue": issue.number, "body": "Go with B."}
    )
    raw, published = await _body(answer)
    assert answer.status == 200 and raw == _as_json_response_sent(published)
    assert list(published) == ["published", "issue", "comment_id", "comment_url"]
    assert published["published"] is True and published["issue"] == issue.number


async def test_the_answers_schemas_are_exact(api: ApiClient) -> None:
    """Generated from the Structs as the hand-written ones were: every key required, no
    other allowed (so the response check fails on a key the document does not name)."""
    document = await (await api.raw.get("/api/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for name in ("Health", "Readiness", "ReadinessCheck", "Published", "Filed", "CodingSandbox"):
        schema = schemas[name]
        assert schema["additionalProperties"] is False, name
        assert sorted(schema["required"]) == sorted(schema["properties"]), name
    checks = schemas["Readiness"]["properties"]["checks"]
    assert checks["additionalProperties"] == {"$ref": "#/components/schemas/ReadinessCheck"}
