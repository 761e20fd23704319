"""The task detail's failing-CI history (the task JSON's `ci`, docs/api.md "CI fix runs"):
each head commit CI failed on, the fix run it started of the bound, and how that ended, in
the GUI's words (web_gui/static/loop_news.js, OUTCOME_WORDS)."""

from __future__ import annotations

from tui_client.tasks_wire import CiFix

OUTCOME_WORDS = {
    "queued": "fix run under way",
    "pushed": "fixed in",
    "unchanged": "the fix run changed nothing: a person is asked",
    "superseded": "the branch moved on before the fix run",
    "ended": "the fix run ended without a push",
    "stopped": "no fix run: a person is asked",
    "interrupted": "the pull request was merged or closed under the fix run",
}
ASKED = frozenset({"unchanged", "stopped"})


def ci_lines(fixes: list[CiFix]) -> list[str]:
    if not fixes:
        return []
    lines = ["", "CI fix runs:"]
    for fix in fixes:
        which = f"fix run {fix.run}{f' of {fix.of}' if fix.of else ''}" if fix.run else "no fix run"
        checks = ", ".join(fix.checks)
        words = OUTCOME_WORDS.get(fix.outcome, fix.outcome)
        if fix.outcome == "pushed" and fix.result_sha:
            words += f" {fix.result_sha[:7]}"
        line = f"  CI failed on {fix.head_sha[:7]}"
        lines.append(f"{line}{f' ({checks})' if checks else ''} · {which} · {words}")
        if fix.outcome in ASKED and fix.reason:
            lines.append(f"    {' '.join(fix.reason.split())[:200]}")
    return lines
