"""What the task detail shows of issue 34: a plan-first task's plan, why a queued task is
held (its repository's budget), what it will likely spend, and the past Decisions offered
for the question it waits on (the draft is published from Chat, never from here)."""

from __future__ import annotations

from tui_client.tasks_wire import TaskDetail, TaskUsage

PLAN_LINES = 12


def leverage_lines(detail: TaskDetail) -> list[str]:
    lines: list[str] = []
    if detail.held:
        lines += ["", detail.held]
    if detail.estimate:
        lines += ["", detail.estimate.text]
    if plan := detail.plan:
        edited = " (edited by the operator)" if plan.edited else ""
        lines += ["", f"Plan: {plan.status}{edited}"]
        lines += [f"  {line}" for line in (plan.brief or plan.text).splitlines()[:PLAN_LINES]]
        if plan.status == "proposed":
            lines.append("  Approve, edit or reject it with a Decision (Discuss the issue).")
    if detail.offered:
        lines += ["", "Earlier Decisions on similar questions (a draft waits in Discuss):"]
        for offer in detail.offered:
            said = " ".join(offer.decision.split())[:120]
            lines.append(f"  #{offer.issue} ({offer.at[:10]}): {said}")
    return lines


def cost_text(usage: TaskUsage, dollars: str) -> str:
    """The cost as reported; tokens without a cost are "cost unknown", never $0.00."""
    if dollars:
        return f"cost {dollars}"
    return "cost unknown" if usage.tokens else "cost $0.00"
