"""Every typed record of a GitHub answer (bot/github/records.py, issue_records.py, app_records.py)
held to GitHub's own OpenAPI description of the operations it is read from: each field is
one the answer describes, of the described type, accepting null where GitHub says it may be
null and with a default where GitHub may leave it out. First the check is shown to bite."""

from __future__ import annotations

import json
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
# Fields that accept null where the description says they never are, each with the
# evidence that GitHub sends null anyway.
NULL_BEYOND_THE_DESCRIPTION = {
    # octokit's pull_request webhook schema (common/pull-request.schema.json): `head.repo`
    # is `oneOf [repository, null]`, null once the fork it came from is deleted.
    (records.PullRef, "repo"),
    # A review is also read from the pull_request_review webhook (bot/lifecycle/reviews.py),
    # whose schema (common/pull-request-review.schema.json) has `body: string | null`.
    (records.Review, "body"),
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


@pytest.fixture(scope="module")
def description() -> Description:
    return Description()


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


def record_problems(
    description: Description, record: type[msgspec.Struct], sources: list[tuple[str, str | None]]
) -> list[str]:
    """Every way `record` says more than the answers it is read from. A field may take None
    when one of those answers may hold null there (a list's "simple" form, say)."""
    answers = [
        answer for operation_id, key in sources for answer in description.answers(operation_id, key)
    ]
    found: list[str] = []
    never_null: dict[str, int] = {}
    for where, schema in answers:
        for path, message in problems_of(description, mi.type_info(record), schema):
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


def test_the_check_passes_what_github_describes(description: Description) -> None:
    assert record_problems(description, DescribedFully, [("issues/get", None)]) == []


def test_an_operation_github_does_not_describe_is_a_failure(description: Description) -> None:
    with pytest.raises(AssertionError, match="no issues/lock"):
        record_problems(description, issue_records.Issue, [("issues/lock", None)])


# -- the records ---------------------------------------------------------------------------


@pytest.mark.parametrize("record", list(SOURCES), ids=lambda record: record.__name__)
def test_each_record_says_only_what_github_describes(
    description: Description, record: type[msgspec.Struct]
) -> None:
    assert record_problems(description, record, SOURCES[record]) == []


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
