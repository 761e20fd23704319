"""A CI webhook as the lifecycle reads it: which commit failed, in what, reported by whom.

`check_run`, `check_suite`, `workflow_run` and `workflow_job` `completed`, and `status`,
each name the commit (`head_sha` / `sha`) and the branches it is on. Only a failure is
read: a check or run that concluded `failure` or `timed_out`, a status `failure` or
`error`. Anything else (success, neutral, skipped, cancelled by a person, a status still
pending) is None: nothing to do. The payload was checked for the fields its handler needs
before the handler ran (webhooks.handlers.ci); optional fields read as empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Conclusions that say the change may be at fault; `cancelled`, `stale`, `action_required`
# and `neutral` are a person's or GitHub's doing, not a red result.
FAILED_CONCLUSIONS = frozenset({"failure", "timed_out"})
FAILED_STATES = frozenset({"failure", "error"})
CI_EVENTS = ("check_run", "check_suite", "workflow_run", "workflow_job", "status")


@dataclass(frozen=True)
class CiFailure:
    """One failure report about a commit of `repo`."""

    event: str  # the webhook event it came from
    repo: str
    head_sha: str
    branches: tuple[str, ...]  # branches the commit is on (as the event names them)
    name: str  # the check's, run's or job's name, or the status context
    conclusion: str  # the check's conclusion or the status state
    app_id: int | None = None  # the GitHub App that made the check (None for statuses)
    sender: str = ""  # who reported it (a status's creator)
    pull_numbers: tuple[int, ...] = ()  # pull requests the event names (may be empty)


def parse_failure(event: str, payload: dict[str, Any]) -> CiFailure | None:
    """The failure `payload` reports, or None when it reports none."""
    repo = str(_at(payload, "repository", "full_name") or "")
    if event == "status":
        return _status(payload, repo)
    item = payload.get(event)
    # Only a `completed` event reports a result: GitHub also sends `check_run.created`,
    # `check_suite.requested`/`rerequested`, `workflow_run.requested`/`in_progress` and
    # `workflow_job.queued`/`in_progress` as CI starts, and a check run created already
    # concluded has its conclusion in `created` too (its `completed` follows).
    if payload.get("action") != "completed" or not isinstance(item, dict):
        return None
    # A signed payload may still hold another type than GitHub's (a list for a
    # conclusion): read as text or not at all, never a TypeError retried until dead.
    if _text(item.get("status")) not in (None, "completed"):
        return None
    if _text(item.get("conclusion")) not in FAILED_CONCLUSIONS:
        return None
    branches = [item.get("head_branch"), _at(item, "check_suite", "head_branch")]
    pulls = _items(item.get("pull_requests"))
    branches += [_at(pull, "head", "ref") for pull in pulls if isinstance(pull, dict)]
    app = item.get("app")
    return CiFailure(
        event=event,
        repo=repo,
        head_sha=str(item.get("head_sha") or ""),
        branches=_names(branches),
        name=str(item.get("name") or item.get("workflow_name") or event),
        conclusion=str(item["conclusion"]),
        app_id=_int(_at(app, "id")) if isinstance(app, dict) else None,
        sender=str(_at(payload, "sender", "login") or ""),
        pull_numbers=tuple(
            n for n in (_int(_at(p, "number")) for p in pulls if isinstance(p, dict)) if n
        ),
    )


def _status(payload: dict[str, Any], repo: str) -> CiFailure | None:
    state = _text(payload.get("state"))
    if state not in FAILED_STATES:
        return None
    branches = [_at(b, "name") for b in _items(payload.get("branches")) if isinstance(b, dict)]
    return CiFailure(
        event="status",
        repo=repo,
        head_sha=str(payload.get("sha") or ""),
        branches=_names(branches),
        name=str(payload.get("context") or "default"),
        conclusion=str(state),
        sender=str(_at(payload, "sender", "login") or ""),
    )


def _at(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(values: list[Any]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        if isinstance(value, str) and value:
            seen.setdefault(value, None)
    return tuple(seen)
