"""Checks against the real thing: GitHub's OpenAPI description (REST requests and
responses) and octokit/webhooks' schemas and example payloads (webhooks).

`data_dir` is a copy of `shared/github/` (tests pass `../shared/github` from the repo
root). jsonschema and jsonschema-rs are development dependencies, imported here only.

The suite checks every request, answer and webhook of every test that uses the sandbox, so
what can be done once is: `Contract.of(folder)` reads and converts the description once per
process, and each schema is compiled once (`CompiledSchema`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft4Validator, Draft7Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from github_sandbox.sandbox import Exchange

# The description grown to 49 operations for the work after the pull request (a superset
# of `openapi/github-rest-trimmed.json`; shared/github/README.md).
OPENAPI_FILE = "after-pr/openapi/github-rest-trimmed.json"
# Answers any endpoint can give, whether or not its description lists them: bad
# credentials, rate limits, server errors, and 404 for what does not exist or the
# credential cannot see (GitHub docs, "Troubleshooting the REST API"; the description
# leaves 404 out of several operations on a numbered resource, e.g. create-review).
ANY_ENDPOINT_ERRORS = frozenset({401, 403, 404, 429, 500, 502, 503})
# GitHub answers a write whose input it cannot take (a field of the wrong kind, a commit
# that does not exist) with 422 and one of its error shapes, whether or not the operation's
# description lists it (GitHub docs, "Troubleshooting the REST API": 422 Unprocessable
# Entity; the description leaves it out of e.g. checks/create).
INVALID_INPUT = 422
WRITES = frozenset({"POST", "PATCH", "PUT"})
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


class CompiledSchema:
    """One schema, compiled once and checked against many instances. jsonschema-rs (Rust,
    ~30 times faster here) gives the verdict; an instance it rejects is checked again by
    jsonschema, whose findings are the ones reported: problems read as they always have,
    and an instance only Rust would reject (its regex `$` takes no final newline) passes.
    The two agree on every example in shared/github and on broken copies of them
    (tests/test_sandbox_contract.py)."""

    def __init__(self, fast: jsonschema_rs.Validator, slow: Callable[[], Any]) -> None:
        self._fast = fast
        self._build_slow = slow

    @cached_property
    def _slow(self) -> Any:  # built on the first failure only
        return self._build_slow()

    def _fast_verdict(self, instance: Any) -> bool | None:
        try:
            return self._fast.is_valid(instance)
        except ValueError:  # a value JSON cannot hold (a number as a key): jsonschema judges
            return None

    def verdicts(self, instance: Any) -> tuple[bool | None, bool]:
        """jsonschema-rs's verdict and jsonschema's, for tests that hold them equal."""
        return self._fast_verdict(instance), next(self._slow.iter_errors(instance), None) is None

    def problems(self, instance: Any) -> list[str]:
        if self._fast_verdict(instance):
            return []
        return [
            f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message[:300]}"
            for error in self._slow.iter_errors(instance)
        ]


class Contract:
    """GitHub's contract as read from `data_dir`. Take the shared one (`Contract.of`): the
    description, the schemas and the examples are read once per process, and never changed
    (callers read `openapi`, never write it)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        # Compiled schemas by their JSON text (equal schemas share one).
        self._rest_schemas: dict[str, CompiledSchema] = {}
        self._webhook_schemas: dict[Path, CompiledSchema | None] = {}
        self._first_examples: dict[tuple[str, str | None], Any] = {}

    @staticmethod
    def of(data_dir: Path) -> Contract:
        """The one Contract of this folder in this process."""
        return _contract_of(data_dir.resolve())

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

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.openapi
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def rest_schema(self, schema: dict[str, Any]) -> CompiledSchema:
        """A schema of the description (or built on its components), compiled once."""
        key = json.dumps(schema)
        compiled = self._rest_schemas.get(key)
        if compiled is None:
            # OpenAPI 3.0 schemas are Draft 4's dialect; refs point into `components`.
            components = self.openapi["components"]
            root = {"allOf": [schema], "components": components}
            # Rust compiles only what the schema reaches (all of it took 12 ms a schema).
            reached = {"allOf": [schema], "components": _reached(schema, components)}
            compiled = CompiledSchema(
                jsonschema_rs.Draft4Validator(reached, validate_formats=False, offline=True),
                lambda: Draft4Validator(root),
            )
            self._rest_schemas[key] = compiled
        return compiled

    def _validate(self, schema: dict[str, Any], instance: Any) -> list[str]:
        return self.rest_schema(schema).problems(instance)

    def request_problems(self, method: str, route: str, body: Any) -> list[str]:
        operation, problems = self._described(method, route)
        if operation is None:
            return problems
        if "requestBody" not in operation:
            return [] if body is None else [f"{method} {route} takes no body, got one"]
        spec = self.resolve(operation["requestBody"])
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
            for spec in map(self.resolve, operation.get("parameters", []))
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
        if spec is None and status == INVALID_INPUT and method.upper() in WRITES:
            return self.error_problems(body)
        if spec is None:
            return [f"status {status} is not a documented answer of {method} {route}"]
        documented = self.resolve(spec).get("content", {})
        content = documented.get(media_type)
        if content is None and documented:
            return [f"{status} of {method} {route} documents no {media_type} body"]
        if content is None:
            return [] if body is None else [f"{status} documents no body, got one"]
        return self._validate(content["schema"], body)

    def header_problems(
        self,
        method: str,
        route: str,
        status: int,
        headers: Mapping[str, str],
        body: Any = None,
    ) -> list[str]:
        """The answer's headers against what the description documents for it: each
        documented header is there (a `Link` only when there is another page, so it is
        checked for its form when present) with a value its schema accepts; a `Location`
        names the created resource (GitHub's is its `url`); a `Link` where the operation
        documents none is one GitHub would not send. Header names are case-insensitive."""
        operation, problems = self._described(method, route)
        if operation is None:
            return problems
        sent = {name.lower(): value for name, value in headers.items()}
        spec = operation["responses"].get(str(status))
        documented = {} if spec is None else self.resolve(spec).get("headers", {})
        named = {name.lower(): self.resolve(header) for name, header in documented.items()}
        where = f"{status} of {method} {route}"
        if "link" in sent and "link" not in named:
            problems.append(f"{where} documents no Link header, got one")
        for name, header in named.items():
            value = sent.get(name)
            if value is None:
                if name != "link":
                    problems.append(f"{where} lacks its documented {name} header")
                continue
            schema = header.get("schema", {})
            problems += [
                f"header {name}: {p.removeprefix('<root>: ')}"
                for p in self._validate(schema, _typed(schema, value))
            ]
            if name == "link" and not _LINK.fullmatch(value):
                problems.append(f"header link is not GitHub's form: {value[:200]}")
        location = sent.get("location")
        if location is not None and isinstance(body, dict) and isinstance(body.get("url"), str):
            if location != body["url"]:
                problems.append(f"header location {location} is not the resource {body['url']}")
        return problems

    def exchange_problems(self, ex: Exchange) -> list[str]:
        """Everything the description says of one exchange the sandbox served: the query,
        the request, the answer's status, body and headers. A request the schema rejects
        passes only when refused with one of GitHub's error shapes, under a status the
        operation documents (or any endpoint may give): a sandbox that took it, or refused
        it as GitHub never would, would hide a client's mistake."""
        where = f"{ex.method} {ex.path} -> {ex.status}"
        problems = []
        if ex.query:
            problems += [
                f"{where} query {p}" for p in self.query_problems(ex.method, ex.route, ex.query)
            ]
        operation = self.operation(ex.method, ex.route)
        if ex.method in ("POST", "PATCH", "PUT"):
            broken = self.request_problems(ex.method, ex.route, ex.request)
            if broken and 400 <= ex.status < 500 and operation is not None:
                problems += [f"{where} refusal {p}" for p in self.error_problems(ex.response)]
                documented = str(ex.status) in operation["responses"]
                if not documented and ex.status not in {*ANY_ENDPOINT_ERRORS, INVALID_INPUT}:
                    problems.append(
                        f"{where} refusal: status {ex.status} is not a documented answer"
                    )
                return problems
            problems += [f"{where} request {p}" for p in broken]
        problems += [
            f"{where} response {p}"
            for p in self.response_problems(ex.method, ex.route, ex.status, ex.response)
        ]
        if operation is not None:
            problems += [
                f"{where} {p}"
                for p in self.header_problems(
                    ex.method, ex.route, ex.status, ex.headers, ex.response
                )
            ]
        return problems

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
    def _webhook_registries(self) -> tuple[Registry[Any], jsonschema_rs.Registry]:
        """Every webhook schema by its `$id` (they refer to each other: common/*.json),
        for jsonschema and for jsonschema-rs."""
        schemas = [
            json.loads(path.read_text())
            for path in sorted((self.data_dir / "webhook-schemas").rglob("*.schema.json"))
        ]
        python: Registry[Any] = Registry().with_resources(
            (schema["$id"], Resource.from_contents(schema, DRAFT7)) for schema in schemas
        )
        return python, jsonschema_rs.Registry([(schema["$id"], schema) for schema in schemas])

    def webhook_schema_path(self, event: str, action: str | None) -> Path:
        folder = self.data_dir / "webhook-schemas" / event
        return folder / ("event.schema.json" if action is None else f"{action}.schema.json")

    def webhook_schema(self, event: str, action: str | None) -> CompiledSchema | None:
        """The schema of this event and action, compiled once (None: octokit has none)."""
        path = self.webhook_schema_path(event, action)
        if path not in self._webhook_schemas:
            compiled = None
            if path.exists():
                schema = json.loads(path.read_text())
                python, rust = self._webhook_registries
                compiled = CompiledSchema(
                    jsonschema_rs.Draft7Validator(
                        schema, registry=rust, validate_formats=False, offline=True
                    ),
                    lambda: Draft7Validator(schema, registry=python),
                )
            self._webhook_schemas[path] = compiled
        return self._webhook_schemas[path]

    def webhook_problems(self, event: str, payload: dict[str, Any]) -> list[str]:
        action = payload.get("action")
        compiled = self.webhook_schema(event, action if isinstance(action, str) else None)
        if compiled is None:
            return [f"no webhook schema for {event}.{action}"]
        return compiled.problems(payload)

    def examples(self, event: str, action: str | None) -> list[Path]:
        folder = self.data_dir / "webhook-examples" / event
        if action is None:
            return sorted(folder.glob("*.json"))
        return sorted(p for p in folder.glob("*.json") if p.name.split(".")[0] == action)

    def _first_example(self, event: str, action: str | None) -> Any:
        """The first real example of this event and action, read once (None: there is none)."""
        key = (event, action)
        if key not in self._first_examples:
            examples = self.examples(event, action)
            self._first_examples[key] = json.loads(examples[0].read_text()) if examples else None
        return self._first_examples[key]

    def shape_problems(self, event: str, payload: dict[str, Any]) -> list[str]:
        """Keys a real example of this event and action has that `payload` lacks
        (recursively, where both sides hold an object). Organization and enterprise keys
        only appear for organisation-owned repositories and are not required."""
        action = payload.get("action")
        example = self._first_example(event, action if isinstance(action, str) else None)
        if example is None:
            return []
        optional = {"organization", "enterprise", "installation", "changes", "requester"}
        if event == "ping":
            # The examples are repository hooks' pings; an App's ping names no repository.
            optional |= {"repository", "sender"}
        return _missing_keys(example, payload, "", optional)


# `<url>; rel="next"`, comma-separated (GitHub docs, "Using pagination in the REST API").
_LINK_ITEM = r'<https?://[^>]+>; rel="(?:next|last|prev|first)"'
_LINK = re.compile(rf"{_LINK_ITEM}(?:, {_LINK_ITEM})*")


@cache
def _contract_of(data_dir: Path) -> Contract:
    return Contract(data_dir)


def _reached(schema: Any, components: dict[str, Any]) -> dict[str, Any]:
    """The components `schema` reaches through its `$ref`s and theirs (a ref to none
    fails to compile: never a silent pass)."""
    reached: dict[str, dict[str, Any]] = {}
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo += node
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/"):
                section, name = ref.removeprefix("#/components/").split("/")[:2]
                found = reached.setdefault(section, {})
                if name not in found and name in components.get(section, {}):
                    found[name] = components[section][name]
                    todo.append(found[name])
            todo += node.values()
    return reached


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
