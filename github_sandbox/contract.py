"""Checks against the real thing: GitHub's OpenAPI description (REST requests and
responses) and octokit/webhooks' schemas and example payloads (webhooks).

`data_dir` is a copy of `shared/github/` (tests pass `../shared/github` from the repo
root). jsonschema is a development dependency, imported here only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

# The description grown to 49 operations for the work after the pull request (a superset
# of `openapi/github-rest-trimmed.json`; shared/github/README.md).
OPENAPI_FILE = "after-pr/openapi/github-rest-trimmed.json"
# Answers any endpoint can give, whether or not its description lists them: bad
# credentials, rate limits, server errors, and 404 for what does not exist or the
# credential cannot see (GitHub docs, "Troubleshooting the REST API"; the description
# leaves 404 out of several operations on a numbered resource, e.g. create-review).
ANY_ENDPOINT_ERRORS = frozenset({401, 403, 404, 429, 500, 502, 503})
# Objects whose keys are data (which permissions an App holds), not part of the shape.
DATA_MAPS = frozenset({"permissions", "custom_properties"})
# Keys an example has because of what it happened to describe, at any depth: a check run
# for a deployment names it (octokit's check_run examples are).
INCIDENTAL_KEYS = frozenset({"deployment"})


def openapi_to_jsonschema(node: Any) -> Any:
    """OpenAPI 3.0 schema -> JSON Schema: `nullable: true` becomes a "null" type."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {k: openapi_to_jsonschema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is True:
        kind = converted.get("type")
        if isinstance(kind, str):
            converted["type"] = [kind, "null"]
            if "enum" in converted and None not in converted["enum"]:
                converted["enum"] = [*converted["enum"], None]
        else:
            converted = {"anyOf": [converted, {"type": "null"}]}
    return converted


class Contract:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    # -- REST ------------------------------------------------------------------------------

    @cached_property
    def openapi(self) -> dict[str, Any]:
        document = json.loads((self.data_dir / OPENAPI_FILE).read_text())
        converted: dict[str, Any] = openapi_to_jsonschema(document)
        return converted

    def operation(self, method: str, route: str) -> dict[str, Any] | None:
        found = self.openapi["paths"].get(route, {}).get(method.lower())
        return found if isinstance(found, dict) else None

    def _described(self, method: str, route: str) -> tuple[dict[str, Any] | None, list[str]]:
        """The operation, or the problem that it has no description: what the contract
        does not know can never pass."""
        operation = self.operation(method, route)
        if operation is None:
            return None, [f"{method} {route} is not an operation GitHub's description has"]
        return operation, []

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.openapi
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def _validate(self, schema: dict[str, Any], instance: Any) -> list[str]:
        from jsonschema import Draft4Validator

        root = {"allOf": [schema], "components": self.openapi["components"]}
        return [
            f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message[:300]}"
            for error in Draft4Validator(root).iter_errors(instance)
        ]

    def request_problems(self, method: str, route: str, body: Any) -> list[str]:
        operation, problems = self._described(method, route)
        if operation is None:
            return problems
        if "requestBody" not in operation:
            return [] if body is None else [f"{method} {route} takes no body, got one"]
        spec = self._resolve(operation["requestBody"])
        if body is None and not spec.get("required", False):
            return []
        return self._validate(spec["content"]["application/json"]["schema"], body)

    def query_problems(self, method: str, route: str, query: Mapping[str, str]) -> list[str]:
        """Every query parameter must be one the operation declares, with a value its
        schema accepts (query strings are text: integers and booleans are parsed first)."""
        operation, problems = self._described(method, route)
        if operation is None:
            return problems
        declared = {
            spec["name"]: spec["schema"]
            for spec in map(self._resolve, operation.get("parameters", []))
            if spec.get("in") == "query"
        }
        for name, raw in query.items():
            schema = declared.get(name)
            if schema is None:
                problems.append(f"query parameter {name!r} is not declared by {method} {route}")
                continue
            problems += [
                f"query parameter {name}: {p.removeprefix('<root>: ')}"
                for p in self._validate(schema, _typed(schema, raw))
            ]
        return problems

    def response_problems(
        self,
        method: str,
        route: str,
        status: int,
        body: Any,
        media_type: str = "application/json",
    ) -> list[str]:
        operation, problems = self._described(method, route)
        if operation is None:
            return problems
        spec = operation["responses"].get(str(status))
        if spec is None and status in ANY_ENDPOINT_ERRORS:
            return self._validate({"$ref": "#/components/schemas/basic-error"}, body)
        if spec is None:
            return [f"status {status} is not a documented answer of {method} {route}"]
        documented = self._resolve(spec).get("content", {})
        content = documented.get(media_type)
        if content is None and documented:
            return [f"{status} of {method} {route} documents no {media_type} body"]
        if content is None:
            return [] if body is None else [f"{status} documents no body, got one"]
        return self._validate(content["schema"], body)

    def error_problems(self, body: Any) -> list[str]:
        """An answer refusing a request the description's schema rejects: any of GitHub's
        error shapes (basic, validation, simple validation) passes."""
        shapes = ("basic-error", "validation-error", "validation-error-simple")
        # GitHub's errors always say why (`basic-error` itself requires nothing).
        said = {"type": "object", "required": ["message"]}
        found = [
            self._validate({"allOf": [{"$ref": f"#/components/schemas/{n}"}, said]}, body)
            for n in shapes
        ]
        return [] if any(not problems for problems in found) else found[0]

    # -- webhooks --------------------------------------------------------------------------

    @cached_property
    def _webhook_registry(self) -> Any:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        resources = []
        for path in (self.data_dir / "webhook-schemas").rglob("*.schema.json"):
            schema = json.loads(path.read_text())
            resources.append((schema["$id"], Resource.from_contents(schema, DRAFT7)))
        return Registry().with_resources(resources)

    def webhook_schema_path(self, event: str, action: str | None) -> Path:
        folder = self.data_dir / "webhook-schemas" / event
        return folder / ("event.schema.json" if action is None else f"{action}.schema.json")

    def webhook_problems(self, event: str, payload: dict[str, Any]) -> list[str]:
        from jsonschema import Draft7Validator

        action = payload.get("action")
        path = self.webhook_schema_path(event, action if isinstance(action, str) else None)
        if not path.exists():
            return [f"no webhook schema for {event}.{action}"]
        validator = Draft7Validator(json.loads(path.read_text()), registry=self._webhook_registry)
        return [
            f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message[:300]}"
            for error in validator.iter_errors(payload)
        ]

    def examples(self, event: str, action: str | None) -> list[Path]:
        folder = self.data_dir / "webhook-examples" / event
        if action is None:
            return sorted(folder.glob("*.json"))
        return sorted(p for p in folder.glob("*.json") if p.name.split(".")[0] == action)

    def shape_problems(self, event: str, payload: dict[str, Any]) -> list[str]:
        """Keys a real example of this event and action has that `payload` lacks
        (recursively, where both sides hold an object). Organization and enterprise keys
        only appear for organisation-owned repositories and are not required."""
        action = payload.get("action")
        examples = self.examples(event, action if isinstance(action, str) else None)
        if not examples:
            return []
        example = json.loads(examples[0].read_text())
        optional = {"organization", "enterprise", "installation", "changes", "requester"}
        if event == "ping":
            # The examples are repository hooks' pings; an App's ping names no repository.
            optional |= {"repository", "sender"}
        return _missing_keys(example, payload, "", optional)


def _typed(schema: dict[str, Any], raw: str) -> Any:
    """A query string value as the type its schema names (unparseable text stays text, so
    the schema check reports it)."""
    kind = schema.get("type")
    if kind == "integer":
        try:
            return int(raw)
        except ValueError:
            return raw
    if kind == "boolean" and raw in ("true", "false"):
        return raw == "true"
    return raw


def _missing_keys(example: Any, ours: Any, where: str, optional: set[str]) -> list[str]:
    if isinstance(example, list) and isinstance(ours, list) and example and ours:
        return _missing_keys(example[0], ours[0], f"{where}[0]", set())
    if not (isinstance(example, dict) and isinstance(ours, dict)):
        return []
    problems = []
    for key, value in example.items():
        if key not in ours:
            if key not in optional and key not in INCIDENTAL_KEYS:
                problems.append(f"{where}/{key}")
            continue
        if key not in DATA_MAPS:
            problems += _missing_keys(value, ours[key], f"{where}/{key}", set())
    return problems
