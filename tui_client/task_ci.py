"""The task detail's failing-CI history (the task JSON's `ci`, docs/api.md "CI fix runs"):
each head commit CI failed on, the fix run it started of the bound, and how that ended, in
the GUI's words (web_gui/static/loop_news.js, OUTCOME_WORDS)."""

from __future__ import annotations

from typing import Any

OUTCOME_WORDS = {
    "queued": "fix run under way",
    "pushed": "fixed in",
    "unchanged": "the fix run changed nothing: a person is asked",
    "superseded": "the branch moved on before the fix run",
    "ended": "the fix run ended without a push",
    "stopped": "no fix run: a person is asked",
}
ASKED = frozenset({"unchanged", "stopped"})


def ci_lines(detail: dict[str, Any]) -> list[str]:
    fixes = list(detail.get("ci") or [])
    if not fixes:
        return []
    lines = ["", "CI fix runs:"]
    for fix in fixes:
        run, bound = int(fix.get("run") or 0), fix.get("of")
        which = f"fix run {run}{f' of {bound}' if bound else ''}" if run else "no fix run"
        checks = ", ".join(str(name) for name in fix.get("checks") or [])
        outcome = str(fix.get("outcome") or "")
        words = OUTCOME_WORDS.get(outcome, outcome)
        if outcome == "pushed" and fix.get("result_sha"):
            words += f" {str(fix['result_sha'])[:7]}"
        line = f"  CI failed on {str(fix.get('head_sha') or '')[:7]}"
        lines.append(f"{line}{f' ({checks})' if checks else ''} · {which} · {words}")
        if outcome in ASKED and fix.get("reason"):
            lines.append(f"    {' '.join(str(fix['reason']).split())[:200]}")
    return lines
