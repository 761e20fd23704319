"""Injected failures: tests tell the sandbox to answer the next matching requests with a
5xx, a secondary rate limit (403 + Retry-After), an exhausted primary limit, or a 429,
optionally after doing the work (GitHub can fail a create after acting on it). Faults
match REST and git-over-HTTP paths alike."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


KNOWN_KEYS = frozenset(
    {
        "kind",
        "status",
        "message",
        "method",
        "path",
        "times",
        "after_effect",
        "headers",
        "retry_after",
        "reset_in",
    }
)


@dataclass
class Fault:
    status: int
    method: str = "*"
    path: str = "*"  # fnmatch pattern on the request path, e.g. "/repos/*/issues"
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "Server Error"
    after_effect: bool = False  # do the work, then fail
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (
            self.times > 0
            and (self.method == "*" or self.method.upper() == method.upper())
            and fnmatch.fnmatchcase(path, self.path)
        )


def fault_from_json(data: dict[str, Any], *, now: float) -> Fault:
    """`kind` picks a preset: server_error, secondary_rate_limit, primary_rate_limit,
    too_many_requests; explicit `status`, `headers`, `message` override it."""
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        raise ValueError(f"unknown fault fields {sorted(unknown)}")
    kind = data.get("kind", "server_error")
    presets: dict[str, dict[str, Any]] = {
        "server_error": {"status": 502, "message": "Server Error"},
        "secondary_rate_limit": {
            "status": 403,
            "message": SECONDARY_MESSAGE,
            "headers": {"retry-after": str(data.get("retry_after", 1))},
        },
        "primary_rate_limit": {
            "status": 403,
            "message": "API rate limit exceeded for installation.",
            "headers": {
                "x-ratelimit-remaining": "0",
                "x-ratelimit-reset": str(int(now + float(data.get("reset_in", 30)))),
            },
        },
        "too_many_requests": {"status": 429, "message": "Too Many Requests", "headers": {}},
    }
    if kind not in presets:
        raise ValueError(f"unknown fault kind {kind!r}; use one of {sorted(presets)}")
    spec = dict(presets[kind])
    for key in ("status", "message", "method", "path", "times", "after_effect"):
        if key in data:
            spec[key] = data[key]
    spec["headers"] = {
        **spec.get("headers", {}),
        **{str(k).lower(): str(v) for k, v in data.get("headers", {}).items()},
    }
    status, times = spec.get("status"), spec.get("times", 1)
    if not isinstance(status, int) or not 400 <= status <= 599:
        raise ValueError("status must be an error status (400-599)")
    if not isinstance(times, int) or times < 1:
        raise ValueError("times must be a positive integer")
    return Fault(**spec)


class FaultPlan:
    def __init__(self) -> None:
        self.faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        self.faults.append(fault)

    def clear(self) -> None:
        self.faults.clear()

    def take(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(method, path):
                fault.times -= 1
                fault.hits += 1
                return fault
        return None
