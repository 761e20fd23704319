"""The API reference page (/api/docs): the app's OpenAPI document rendered as plain HTML,
with no script and no external assets (it works offline and behind any firewall)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, Template, select_autoescape

METHOD_ORDER = ("get", "post", "put", "patch", "delete")


@cache
def _template() -> Template:
    # The compiled template is code, not state: caching it shares nothing between apps.
    env = Environment(
        loader=PackageLoader("operator_api", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("reference.html.j2")


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    return json.dumps(schema, sort_keys=True)


def _operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for path, methods in document["paths"].items():
        for method in sorted(methods, key=METHOD_ORDER.index):
            op = methods[method]
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            found.append(
                {
                    "anchor": f"{method}-{path}".replace("/", "-").strip("-"),
                    "method": method.upper(),
                    "path": path,
                    "summary": op.get("summary", ""),
                    "auth": bool(op.get("security")),
                    "params": op.get("parameters", []),
                    "body": None if body is None else _schema_name(body["schema"]),
                    "body_required": op.get("requestBody", {}).get("required", False),
                    "responses": [
                        (status, answer.get("description", ""), _media(answer))
                        for status, answer in sorted(op["responses"].items())
                    ],
                }
            )
    return found


def _media(answer: dict[str, Any]) -> str:
    parts = []
    for media_type, content in answer.get("content", {}).items():
        parts.append(f"{media_type}: {_schema_name(content.get('schema', {}))}")
    return "; ".join(parts)


def _schemas(document: dict[str, Any]) -> list[dict[str, Any]]:
    listed = []
    for name, schema in sorted(document["components"]["schemas"].items()):
        required = set(schema.get("required", []))
        fields = [
            (field, _type(spec), field in required, spec.get("description", ""))
            for field, spec in schema.get("properties", {}).items()
        ]
        listed.append(
            {"name": name, "fields": fields, "closed": not schema.get("additionalProperties", True)}
        )
    return listed


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        return _schema_name(spec)
    if "enum" in spec:
        return " | ".join(json.dumps(v) for v in spec["enum"])
    if spec.get("type") == "array":
        return f"array of {_type(spec.get('items', {}))}"
    if "oneOf" in spec:
        return " | ".join(_type(option) for option in spec["oneOf"])
    kind = spec.get("type", "any")
    return " | ".join(kind) if isinstance(kind, list) else str(kind)


def render_reference(document: dict[str, Any]) -> str:
    return _template().render(
        info=document["info"],
        operations=_operations(document),
        schemas=_schemas(document),
    )
