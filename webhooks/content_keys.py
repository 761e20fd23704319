"""A delivery's content key: what the body says happened, so a replay is known as one.

GitHub's signature covers the body, not `X-GitHub-Delivery`: anyone who once saw a signed
delivery (a proxy log, a captured request) can send it again under a fresh delivery id, and
the delivery log, keyed on that id, took it as new. The content key names the event by its
own ids instead: `event.action:` and, for the kinds the lifecycle and memory act on, the
object's id and the time it changed (plus what tells two changes in one second apart: the
label, assignee, pushed commit, or a pull request's merge after its close). Those kinds are
listed in `KEY_PATHS`; intake reads the paths with the rest of its fields
(`webhooks.fields`), so the key costs a few attribute reads. Any other kind, an `edited`
action (two edits in one second share `updated_at` and differ only in `changes`) or a
payload lacking an id is keyed on a BLAKE2b digest of the body: a replay is the same
signed bytes, so the digest always catches it.

A pull request closed without a merge or reopened has no content key: closed, reopened and
closed again within one second, its two closes are the same bytes (GitHub's times are whole
seconds, and nothing in the payload counts the changes: not `updated_at`, `closed_at`,
`merged_at` nor any other field of octokit's schema), so no key read from the body tells
the second close from a replay of the first, and keying them took the second for a replay
(its task stayed `delivered` with its pull request closed). Their handler makes a replay
harmless instead: before it acts it reads the pull request from GitHub and follows only a
change GitHub's state agrees with (`bot.lifecycle.pull_end`), so a replay or a redelivery
moves nothing that is not already so. A merge stays keyed: it happens once.

So for an issue's on/off changes: `closed`, `reopened`, `labeled` and `unlabeled` carry no
key. Closed, reopened and closed again within one second, or a label added, removed and
added again (the same label id and `updated_at`), the second is the same bytes as the
first, and keying them took it for a replay (a close that left its task queued on a closed
issue; a pickup label added again that did not start a terminated task). Their handlers
read the issue from GitHub first and follow only what it says now, and a pickup the task
already followed changes nothing (`bot.lifecycle.issue_closed`,
`bot.lifecycle.pickup_signal`); the memory handler keeps the newest text by `updated_at`.

A ping has no content key either: it changes nothing, so replay protection has nothing to
protect, and a service started again pings with the bytes it sent before.

The writer stores the first delivery with a key; a later one with the same key is stored
as `replayed` and never processed (`webhooks.delivery_sql.insert_statements`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

# Per event: the paths that identify one change, the first two required (the object's id
# and its change time); the rest tell apart changes of one object within one second.
KEY_PATHS: dict[str, tuple[str, ...]] = {
    "issue_comment": ("comment.id", "comment.updated_at"),
    "issues": ("issue.id", "issue.updated_at", "label.id", "assignee.id", "milestone.id"),
    "pull_request": (
        "pull_request.id",
        "pull_request.updated_at",
        "pull_request.merged_at",  # closed, reopened and merged in one second
        "label.id",
        "assignee.id",
        "requested_reviewer.id",
        "requested_team.id",
        "after",
    ),
    "pull_request_review": ("review.id", "review.submitted_at", "review.state"),
    "pull_request_review_comment": ("comment.id", "comment.updated_at"),
}
REQUIRED = 2
MAX_CONTENT_KEY = 200
# Actions whose change the ids and time do not pin down (see the module docstring).
_DIGESTED_ACTIONS = frozenset({"edited"})
# State flips that may repeat, byte for byte, within one second: no key (see the module
# docstring); a pull request's merge (`merged_at` set) is keyed.
_UNKEYED = frozenset(
    {
        ("pull_request", "closed"),
        ("pull_request", "reopened"),
        ("issues", "closed"),
        ("issues", "reopened"),
        ("issues", "labeled"),
        ("issues", "unlabeled"),
    }
)
_MERGED_AT = "pull_request.merged_at"
# Events that change nothing: no key, so the same bytes sent again (a service started again
# pings its webhook anew with the body it sent before) are a delivery of their own, never
# listed as `replayed`.
_NO_EFFECT = frozenset({"ping"})


def key_paths(event: str) -> tuple[str, ...]:
    """The payload paths the content key of `event` reads (none: a digest of the body)."""
    return KEY_PATHS.get(event, ())


def content_key(
    event: str, action: str | None, get: Callable[[str], Any], body: bytes
) -> str | None:
    """The delivery's content key (None: never taken for a replay); `get` gives a
    payload's value by dotted path."""
    if event in _NO_EFFECT:
        return None
    if (event, action) in _UNKEYED and not (
        event == "pull_request" and get(_MERGED_AT) is not None
    ):
        return None
    head = f"{event}.{action}" if action else event
    paths = KEY_PATHS.get(event)
    if paths and action not in _DIGESTED_ACTIONS:
        values = [get(path) for path in paths]
        if all(_scalar(value) for value in values[:REQUIRED]) and all(
            value is None or _scalar(value) for value in values[REQUIRED:]
        ):
            key = f"{head}:" + "/".join("" if v is None else str(v) for v in values)
            if len(key) <= MAX_CONTENT_KEY:
                return key
    return f"{head[: MAX_CONTENT_KEY - 40]}#" + hashlib.blake2b(body, digest_size=16).hexdigest()


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool) and value != ""
