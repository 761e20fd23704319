"""What an error answer's `detail` says (docs/api.md, "Errors"): `bot.errors` carries it on
every domain error, `error_body` puts it on the wire, `operator_api/schemas.py` generates
its OpenAPI component from it, and the TUI reads a copy generated from it
(`bot/contracts/errors_wire.py`).

One Struct, not one per kind of error: on the wire a detail is one untagged object whose
keys several kinds share (`allowed` names a field's values in a 400 and a task's next
states in a 409; `retry_after` is in a 429 and a 503; `request_id` in a 409, 500 and 503),
and a client reads it as one shape (msgspec cannot tell untagged Structs apart). Every key
is absent unless set (`UNSET`): a detail carries only the keys its raiser gives, in this
order, and the four that can be null (`session`, `turn_id`, `github_status`,
`github_request_id`) are sent as null when set to None.
"""

from __future__ import annotations

from msgspec import UNSET, Struct, UnsetType


class ErrorDetail(
    Struct, frozen=True, kw_only=True, omit_defaults=True, forbid_unknown_fields=True
):
    """The keys an error answer's `detail` may carry, each only where its error sets it."""

    field: str | UnsetType = UNSET  # the request field refused (400; 404 for `issue`)
    known: list[str] | UnsetType = UNSET  # the agents there are, for an unknown `agent`
    repo: str | UnsetType = UNSET  # the repository an issue was looked for in
    reason: str | UnsetType = UNSET  # why a body is not JSON, a turn failed, Redis failed
    limit: int | UnsetType = UNSET  # a body's size limit (bytes) or nesting depth
    session: str | UnsetType | None = UNSET  # the session of a turn in flight or failed
    turn_id: str | UnsetType | None = UNSET
    task: int | UnsetType = UNSET  # the task refused, the state it is in, the state asked
    state: str | UnsetType = UNSET
    wanted: str | UnsetType = UNSET
    allowed: list[str] | UnsetType = UNSET  # the values a field, or a task's state, allows
    request_id: str | UnsetType = UNSET  # matches the server's log line (409, 500, 503)
    retry_after: int | UnsetType = UNSET  # seconds (429, 503), as `Retry-After` says
    header: str | UnsetType = UNSET  # the request header missing or wrong
    origin: str | UnsetType = UNSET  # a sign-in's origin, refused
    setting: str | UnsetType = UNSET  # the setting that turns a route on
    missing: list[str] | UnsetType = UNSET  # what a webhook payload lacks
    delivery: str | UnsetType = UNSET  # a webhook delivery's id
    base_url: str | UnsetType = UNSET  # the GitHub API a next-page link left
    github_status: int | UnsetType | None = UNSET  # what GitHub answered (None: no answer)
    github_request_id: str | UnsetType | None = UNSET


class ErrorBody(Struct, frozen=True, forbid_unknown_fields=True):
    """The JSON of every error answer: the message (safe to show), a code, and the detail
    (null when the error has none)."""

    error: str
    code: str
    detail: ErrorDetail | None
