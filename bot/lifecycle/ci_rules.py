"""Whether failing CI is the change's to fix: the stated rules (docs/lifecycle.md, "Failing
CI"). A fix run is started only for a failure the change can have caused; one it cannot
is a person's to look at, and a run on it would only burn the bound.

1. Pre-existing: every failing check (by name, or status context) fails on the base
   branch's head too: the change did not break it.
2. Infrastructure: every failing Actions job's log shows an infrastructure signature
   (`INFRASTRUCTURE`: the runner lost, a shutdown signal, no space left, a network error
   reaching a host, a service unavailable), or an empty log (it never ran a step). Only
   Actions jobs have a log to read; any other failing check, or a failing status, counts
   as the change's.
3. Otherwise the change's: a fix run, within the bound.

Whether a failing job's annotated files intersect the pull request's files is not a rule:
a test in an unchanged file failing because of a changed module is the most common red CI
there is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from bot.lifecycle.ci_evidence import Evidence, FailedCheck

INFRASTRUCTURE = re.compile(
    "|".join(
        (
            r"The runner has received a shutdown signal",
            r"lost communication with the server",
            r"The hosted runner .{0,80}lost communication",
            r"The operation was canceled\.",
            r"No space left on device",
            r"Could not resolve host",
            r"Temporary failure in name resolution",
            r"Connection reset by peer",
            r"Connection timed out",
            r"TLS handshake timeout",
            r"\b(?:502 Bad Gateway|503 Service Unavailable|504 Gateway Time-?out)\b",
            r"\bECONNRESET\b|\bETIMEDOUT\b|\bEAI_AGAIN\b",
            r"Unable to download actions|Failed to download action",
        )
    ),
    re.IGNORECASE,
)


class CiCause(StrEnum):
    CHANGE = "change"
    PREEXISTING = "preexisting"
    INFRASTRUCTURE = "infrastructure"
    NOTHING = "nothing"  # nothing is failing on the commit (any more)


@dataclass(frozen=True)
class Judgement:
    cause: CiCause
    reason: str


def judge(evidence: Evidence, failing_on_base: set[str]) -> Judgement:
    failed = evidence.failed
    if not failed:
        return Judgement(CiCause.NOTHING, "no check or status is failing on the commit now")
    names = ", ".join(f'"{name}"' for name in evidence.names)
    if all(check.name in failing_on_base for check in failed):
        return Judgement(
            CiCause.PREEXISTING,
            f"{names} fail on the base branch too, so the change did not break them",
        )
    signatures = [_infrastructure(check) for check in failed]
    if all(signatures):
        found = "; ".join(sorted({s for s in signatures if s}))
        return Judgement(
            CiCause.INFRASTRUCTURE,
            f"{names} failed for a reason outside the change ({found})",
        )
    return Judgement(CiCause.CHANGE, f"{names} failed on the change's head commit")


def _infrastructure(check: FailedCheck) -> str:
    """The infrastructure signature a failing Actions job shows, or "" (not one)."""
    if not check.by_actions or not check.log_read:
        return ""
    if not check.log_tail.strip():
        return "the job's log is empty: it never ran a step"
    found = INFRASTRUCTURE.search(check.log_tail)
    return f"its log says {found.group(0)!r}" if found else ""
