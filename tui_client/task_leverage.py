"""What the task detail shows of issue 34: a plan-first task's plan, why a queued task is
held (its repository's budget), what it will likely spend, and the past Decisions offered
for the question it waits on (the draft is published from Chat, never from here)."""

from __future__ import annotations

from typing import Any

PLAN_LINES = 12


def leverage_lines(detail: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if held := detail.get("held"):
        lines += ["", str(held)]
    if estimate := detail.get("estimate"):
        lines += ["", str(estimate.get("text") or "")]
    plan = detail.get("plan") or {}
    if plan:
        edited = " (edited by the operator)" if plan.get("edited") else ""
        lines += ["", f"Plan: {plan.get('status')}{edited}"]
        text = str(plan.get("brief") or plan.get("text") or "")
        lines += [f"  {line}" for line in text.splitlines()[:PLAN_LINES]]
        if plan.get("status") == "proposed":
            lines.append("  Approve, edit or reject it with a Decision (Discuss the issue).")
    offered = list(detail.get("offered") or [])
    if offered:
        lines += ["", "Earlier Decisions on similar questions (a draft waits in Discuss):"]
        for offer in offered:
            day = str(offer.get("at") or "")[:10]
            said = " ".join(str(offer.get("decision") or "").split())[:120]
            lines.append(f"  #{offer.get('issue')} ({day}): {said}")
    return lines


def cost_text(usage: dict[str, Any], dollars: str) -> str:
    """The cost as reported; tokens without a cost are "cost unknown", never $0.00."""
    if dollars:
        return f"cost {dollars}"
    return "cost unknown" if int(usage.get("tokens") or 0) else "cost $0.00"
