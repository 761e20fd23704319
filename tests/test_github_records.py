"""Every typed record of a GitHub answer (bot/github/records.py, issue_records.py, app_records.py)
held to GitHub's own OpenAPI description of the operations it is read from, and a record also
read from a webhook payload (a review, a review comment) to the payload's JSON Schema as
well (octokit's webhook schemas): each field is one every such answer describes, of the
described type, accepting null where GitHub says it may be null and with a default where
GitHub may leave it out. First the check is shown to bite."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

from bot.github import app_records, issue_records, records
from github_sandbox.contract import OPENAPI_FILE
from tests.conftest import GITHUB_DATA

# Where each record is read from: (operationId, the answer's key holding the list or None).
# A list answer's items are what the record describes.
SOURCES: dict[type[msgspec.Struct], list[tuple[str, str | None]]] = {
    issue_records.Issue: [
        ("issues/create", None),
        ("issues/get", None),
        ("issues/update", None),
        ("issues/list-for-repo", None),
    ],
    issue_records.IssueComment: [
        ("issues/create-comment", None),
        ("issues/update-comment", None),
        ("issues/list-comments", None),
    ],
    issue_records.Label: [("issues/add-labels", None)],
    issue_records.Repository: [("repos/get", None)],
    issue_records.PullRequest: [("pulls/create", None), ("pulls/get", None), ("pulls/list", None)],
    records.MergeState: [("pulls/get", None)],
    records.MergeResult: [("pulls/merge", None)],
    records.PullFile: [("pulls/list-files", None)],
    records.Reaction: [
        ("reactions/create-for-issue-comment", None),
        ("reactions/create-for-pull-request-review-comment", None),
    ],
    records.Review: [("pulls/list-reviews", None)],
    records.ReviewComment: [
        ("pulls/get-review-comment", None),
        ("pulls/create-review-comment", None),
        ("pulls/list-review-comments", None),
        ("pulls/list-comments-for-review", None),
    ],
    records.CheckRun: [("checks/get", None), ("checks/list-for-ref", "check_runs")],
    records.Annotation: [("checks/list-annotations", None)],
    records.CombinedStatus: [("repos/get-combined-status-for-ref", None)],
    records.WorkflowRun: [("actions/get-workflow-run", None)],
    records.Job: [("actions/list-jobs-for-workflow-run", "jobs")],
    app_records.App: [("apps/get-authenticated", None)],
    app_records.Installation: [("apps/get-repo-installation", None)],
    app_records.AccessToken: [("apps/create-installation-access-token", None)],
    app_records.CollaboratorPermission: [("repos/get-collaborator-permission-level", None)],
}
# Records read from webhook payloads too (bot/lifecycle/reviews.py, for the events and
# actions webhooks/lifecycle_hooks.py handles): (the payload schema's $id, its key holding
# the record). Each is held to these schemas as well as to its REST operations.
WEBHOOK_SOURCES: dict[type[msgspec.Struct], list[tuple[str, str]]] = {
    records.Review: [("pull_request_review$submitted", "review")],
    records.ReviewComment: [("pull_request_review_comment$created", "comment")],
}
# Fields that accept null where the description says they never are, each with the
# evidence that GitHub sends null anyway.
NULL_BEYOND_THE_DESCRIPTION = {
    # octokit's pull_request webhook schema (common/pull-request.schema.json): `head.repo`
    # is `oneOf [repository, null]`, null once the fork it came from is deleted.
    (records.PullRef, "repo"),
}
SCALARS: dict[type[mi.Type], str] = {
    mi.StrType: "string",
    mi.IntType: "integer",
    mi.BoolType: "boolean",
    mi.FloatType: "number",
}


class Description:
    """GitHub's OpenAPI description as written (OpenAPI 3.0: `nullable`, `$ref`, `allOf`)."""

    def __init__(self) -> None:
        self.document = json.loads((GITHUB_DATA / OPENAPI_FILE).read_text())
        self.operations = {
            operation["operationId"]: operation
            for methods in self.document["paths"].values()
            for operation in methods.values()
            if isinstance(operation, dict) and "operationId" in operation
        }

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.document
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def answers(self, operation_id: str, key: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        """(where, schema of one record) for every 2xx JSON answer of the operation."""
        operation = self.operations.get(operation_id)
        assert operation is not None, f"GitHub's description has no {operation_id}"
        found = False
        for status, response in operation["responses"].items():
            content = self.resolve(response).get("content", {}).get("application/json")
            if not status.startswith("2") or content is None:
                continue
            schema = self.resolve(content["schema"])
            if key is not None:
                schema = self.resolve(schema["properties"][key])
            if schema.get("type") == "array":
                schema = self.resolve(schema["items"])
            found = True
            yield f"{operation_id} {status}", schema
        assert found, f"{operation_id} describes no JSON answer"

    def object_parts(self, schema: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
        """Properties and required names of an object schema, `allOf` merged."""
        schema = self.resolve(schema)
        properties = dict(schema.get("properties", {}))
        required = set(schema.get("required", []))
        for part in schema.get("allOf", []):
            more, needed = self.object_parts(part)
            properties.update(more)
            required |= needed
        return properties, required

    def kinds(self, schema: dict[str, Any]) -> list[dict[str, Any]]:
        """The alternatives a value may take (`oneOf`/`anyOf`), or the schema itself."""
        schema = self.resolve(schema)
        alternatives = schema.get("oneOf") or schema.get("anyOf")
        if alternatives:
            return [kind for part in alternatives for kind in self.kinds(part)]
        return [schema]

    def nullable(self, schema: dict[str, Any]) -> bool:
        if schema.get("nullable") is True or self.resolve(schema).get("nullable") is True:
            return True
        return any(kind.get("nullable") is True for kind in self.kinds(schema))

    def type_of(self, schema: dict[str, Any]) -> str | None:
        schema = self.resolve(schema)
        if "type" in schema:
            return str(schema["type"])
        if "properties" in schema or "allOf" in schema:
            return "object"
        return None


class WebhookDescription(Description):
    """octokit's JSON Schemas of webhook payloads (draft-07: a `type` list holding "null",
    `$ref` to another file, relative to the referring schema's `$id`)."""

    def __init__(self) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}
        for path in (GITHUB_DATA / "webhook-schemas").rglob("*.schema.json"):
            schema = json.loads(path.read_text())
            base = posixpath.dirname(schema["$id"])
            self.schemas[schema["$id"]] = _absolute_refs(schema, base)

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = self.schemas[node["$ref"]]
        return node

    def answers(self, schema_id: str, key: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        """(where, schema of the record) in the payload schema `schema_id` (`<event>$<action>`)."""
        payload = self.schemas.get(schema_id)
        assert payload is not None, f"the webhook schemas have no {schema_id}"
        assert key is not None, "a record is read from one key of a payload"
        yield f"webhook {schema_id}", self.resolve(payload["properties"][key])

    def kinds(self, schema: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null alternatives: `oneOf`/`anyOf`, or each type of a `type` list."""
        schema = self.resolve(schema)
        alternatives = schema.get("oneOf") or schema.get("anyOf")
        if alternatives:
            return [kind for part in alternatives for kind in self.kinds(part)]
        types = schema.get("type")
        if isinstance(types, list):
            return [{**schema, "type": name} for name in types if name != "null"]
        return [] if types == "null" else [schema]

    def nullable(self, schema: dict[str, Any]) -> bool:
        def holds_null(node: dict[str, Any]) -> bool:
            node = self.resolve(node)
            types = node.get("type")
            if types == "null" or (isinstance(types, list) and "null" in types):
                return True
            return any(holds_null(part) for part in node.get("oneOf") or node.get("anyOf") or [])

        return holds_null(schema)

    def type_of(self, schema: dict[str, Any]) -> str | None:
        schema = self.resolve(schema)
        types = schema.get("type")
        if isinstance(types, list):
            named = [name for name in types if name != "null"]
            return named[0] if len(named) == 1 else None
        return super().type_of(schema)


def _absolute_refs(node: Any, base: str) -> Any:
    """`node` with every `$ref` made the `$id` of the schema it names."""
    if isinstance(node, list):
        return [_absolute_refs(item, base) for item in node]
    if not isinstance(node, dict):
        return node
    found = {key: _absolute_refs(value, base) for key, value in node.items()}
    if isinstance(found.get("$ref"), str):
        found["$ref"] = posixpath.normpath(posixpath.join(base, found["$ref"]))
    return found


@pytest.fixture(scope="module")
def description() -> Description:
    return Description()


@pytest.fixture(scope="module")
def webhooks() -> WebhookDescription:
    return WebhookDescription()


Problem = tuple[str, str]  # (where in the record, what is wrong)
NEVER_NULL = "takes None, but GitHub says it is always there and never null"


def problems_of(
    description: Description, kind: mi.Type, schema: dict[str, Any], path: str = ""
) -> list[Problem]:
    """How the record type `kind` says more than GitHub's `schema` does ([] if it does not)."""
    members = kind.types if isinstance(kind, mi.UnionType) else (kind,)
    return [
        problem
        for member in members
        if not isinstance(member, mi.NoneType)
        for problem in _one_of(description, member, description.kinds(schema), path)
    ]


def _one_of(
    description: Description, kind: mi.Type, alternatives: list[dict[str, Any]], path: str
) -> list[Problem]:
    """`kind` must be described by one of the alternatives (the last one's problems if none)."""
    found: list[Problem] = []
    for alternative in alternatives:
        found = _described(description, kind, alternative, path)
        if not found:
            return []
    return found


def _described(
    description: Description, kind: mi.Type, schema: dict[str, Any], path: str
) -> list[Problem]:
    described = description.type_of(schema)
    if isinstance(kind, mi.StructType):
        if described != "object":
            return [(path, f"a record ({kind.cls.__name__}), GitHub says {described}")]
        return _fields(description, kind, schema, path)
    if isinstance(kind, mi.ListType | mi.VarTupleType):
        if described != "array":
            return [(path, f"a list, GitHub says {described}")]
        items = description.resolve(schema).get("items", {})
        return problems_of(description, kind.item_type, items, f"{path}[]")
    for scalar, name in SCALARS.items():
        if isinstance(kind, scalar):
            return [] if described == name else [(path, f"{name}, GitHub says {described}")]
    return [(path, f"{type(kind).__name__} is not a type this check knows")]


def _fields(
    description: Description, kind: mi.StructType, schema: dict[str, Any], path: str
) -> list[Problem]:
    properties, required = description.object_parts(schema)
    found: list[Problem] = []
    for field in kind.fields:
        at = f"{path}.{field.encode_name}"
        spec = properties.get(field.encode_name)
        if spec is None:
            found.append((at, "not a field GitHub's description has"))
            continue
        takes_none = isinstance(field.type, mi.UnionType) and any(
            isinstance(member, mi.NoneType) for member in field.type.types
        )
        nullable = description.nullable(spec)
        may_be_absent = field.encode_name not in required
        if nullable and not takes_none:
            found.append((at, "GitHub says it may be null; the record does not take None"))
        if may_be_absent and field.required:
            found.append((at, "GitHub may leave it out; the record has no default"))
        beyond = (kind.cls, field.name) in NULL_BEYOND_THE_DESCRIPTION
        if takes_none and not (nullable or may_be_absent or beyond):
            found.append((at, NEVER_NULL))
        found += problems_of(description, field.type, spec, at)
    return found


Sources = list[tuple[Description, list[tuple[str, str | None]]]]


def record_problems(
    description: Description,
    record: type[msgspec.Struct],
    sources: list[tuple[str, str | None]],
    more: Sources | None = None,
) -> list[str]:
    """Every way `record` says more than the answers it is read from (REST operations in
    `description`, and `more`: webhook payloads, say). A field may take None when one of
    those answers may hold null there (a list's "simple" form, a webhook's payload)."""
    answers = [
        (described, answer)
        for described, named in [(description, sources), *(more or [])]
        for source, key in named
        for answer in described.answers(source, key)
    ]
    found: list[str] = []
    never_null: dict[str, int] = {}
    for described, (where, schema) in answers:
        for path, message in problems_of(described, mi.type_info(record), schema):
            if message == NEVER_NULL:
                never_null[path] = never_null.get(path, 0) + 1
            else:
                found.append(f"{record.__name__} ({where}){path}: {message}")
    return found + [
        f"{record.__name__}{path}: {NEVER_NULL}"
        for path, count in never_null.items()
        if count == len(answers)
    ]


# -- the check bites -----------------------------------------------------------------------


class InventedField(issue_records.Issue, frozen=True):
    invented: str = ""


class WrongType(msgspec.Struct, frozen=True):
    number: str


class NotNullable(msgspec.Struct, frozen=True):
    number: int
    body: str = ""  # GitHub: body may be null


class NoDefault(msgspec.Struct, frozen=True):
    number: int
    body: str | None  # GitHub may leave body out


class NullWhereNever(msgspec.Struct, frozen=True):
    number: int | None


class DescribedFully(msgspec.Struct, frozen=True):
    number: int
    labels: tuple[issue_records.Label | str, ...]
    user: records.GitHubUser | None


class InventedLabel(msgspec.Struct, frozen=True):
    colour: str = ""


class WithInventedLabel(msgspec.Struct, frozen=True):
    labels: tuple[InventedLabel, ...] = ()


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (InventedField, "InventedField (issues/get 200).invented: not a field GitHub's"),
        (WrongType, "WrongType (issues/get 200).number: string, GitHub says integer"),
        (NotNullable, ".body: GitHub says it may be null; the record does not take None"),
        (NoDefault, ".body: GitHub may leave it out; the record has no default"),
        (NullWhereNever, ".number: takes None, but GitHub says it is always there"),
        (WithInventedLabel, ".labels[].colour: not a field GitHub's description has"),
    ],
)
def test_the_check_catches_what_github_does_not_describe(
    description: Description, record: type[msgspec.Struct], expected: str
) -> None:
    found = record_problems(description, record, [("issues/get", None)])
    assert any(expected in problem for problem in found), found


class InventedReviewField(records.Review, frozen=True):
    invented: str = ""


class RestOnlyReviewField(records.Review, frozen=True):
    # In GitHub's REST answer of a review, not in the pull_request_review payload's review.
    body_html: str = ""


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (InventedReviewField, "(webhook pull_request_review$submitted).invented: not a field"),
        (RestOnlyReviewField, "(webhook pull_request_review$submitted).body_html: not a field"),
    ],
)
def test_the_check_holds_a_record_to_the_webhook_it_is_read_from(
    webhooks: WebhookDescription, record: type[msgspec.Struct], expected: str
) -> None:
    found = record_problems(webhooks, record, [("pull_request_review$submitted", "review")])
    assert any(expected in problem for problem in found), found


def test_a_field_only_the_rest_answer_has_passes_rest_alone(description: Description) -> None:
    """What the webhook check adds: GitHub's REST description alone lets this field by."""
    found = record_problems(description, RestOnlyReviewField, SOURCES[records.Review])
    assert not any(".body_html" in problem for problem in found), found


def test_a_webhook_the_schemas_do_not_have_is_a_failure(webhooks: WebhookDescription) -> None:
    with pytest.raises(AssertionError, match=re.escape("no pull_request_review$closed")):
        record_problems(webhooks, records.Review, [("pull_request_review$closed", "review")])


def test_the_check_passes_what_github_describes(description: Description) -> None:
    assert record_problems(description, DescribedFully, [("issues/get", None)]) == []


def test_an_operation_github_does_not_describe_is_a_failure(description: Description) -> None:
    with pytest.raises(AssertionError, match="no issues/lock"):
        record_problems(description, issue_records.Issue, [("issues/lock", None)])


# -- the records ---------------------------------------------------------------------------


@pytest.mark.parametrize("record", list(SOURCES), ids=lambda record: record.__name__)
def test_each_record_says_only_what_github_describes(
    description: Description, webhooks: WebhookDescription, record: type[msgspec.Struct]
) -> None:
    from_webhooks: list[tuple[str, str | None]] = list(WEBHOOK_SOURCES.get(record, []))
    more: Sources = [(webhooks, from_webhooks)]
    assert record_problems(description, record, SOURCES[record], more) == []


def _nested(kind: mi.Type) -> Iterator[type[msgspec.Struct]]:
    if isinstance(kind, mi.StructType):
        yield kind.cls
        for field in kind.fields:
            yield from _nested(field.type)
    elif isinstance(kind, mi.UnionType):
        for member in kind.types:
            yield from _nested(member)
    elif isinstance(kind, mi.ListType | mi.VarTupleType):
        yield from _nested(kind.item_type)


def test_every_record_of_a_github_answer_is_checked() -> None:
    """A record added without saying where it is read from fails here, not in production."""
    declared = {
        value
        for module in (records, issue_records, app_records)
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, msgspec.Struct)
        and value.__module__ == module.__name__
    }
    checked = {nested for record in SOURCES for nested in _nested(mi.type_info(record))}
    assert declared - checked == set()
