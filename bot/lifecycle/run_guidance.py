"""The Decision a continued run resumes with: a CI fix run or an update run that waited for a
person (it asked a question, hit a budget, or Steelframe stopped), whose Decision's run is
that run again or one more of it (bot.lifecycle.ci_decision, bot.lifecycle.base_decision).
Pinned once into the run's prompt, with what the task waited on, as data blocks
(`prompt_blocks`), in place of the issue prompt's Decision lines."""

from __future__ import annotations

from dataclasses import dataclass

from bot.lifecycle.models import Task
from bot.lifecycle.prompt_blocks import defused


@dataclass(frozen=True)
class Guidance:
    """The Decision a run resumes with, and the question it answers (the one the task
    waited on: the run's own, or Steelframe's stop), both pinned into the prompt."""

    decision: str
    question: str | None = None

    @classmethod
    def of(cls, task: Task) -> Guidance | None:
        """The Decision the task's run resumes with, if it resumes with one."""
        if not task.pending_decision:
            return None
        return cls(task.pending_decision, task.question)


def guidance_block(guidance: Guidance, *, waited: str, question_tag: str, asked: str) -> str:
    """The prompt's lines for `guidance`: `waited` names what waited ("This fix run"), the
    question (described as `asked`) goes in a `question_tag` block, the Decision in the
    `operator-guidance` block."""
    question = ""
    if guidance.question:
        question = (
            f"What the task waited on ({asked}):\n"
            f"<{question_tag}>\n{defused(guidance.question)}\n</{question_tag}>\n"
        )
    return (
        f"\n{waited} waited for a person; someone with write access published a Decision "
        "for it. "
        + question
        + "Their guidance (follow it; say in your summary where you could not):\n"
        f"<operator-guidance>\n{defused(guidance.decision)}\n</operator-guidance>\n"
    )


def run_label(number: int, bound: int, *, one_more: bool, task: Task) -> str:
    """Which run this is, as its announcement says it: "N of BOUND", one more a Decision
    asked for, or continued with a Decision."""
    if one_more:
        return f"{number} (one more, asked for by a Decision)"
    if task.pending_decision:
        return f"{number} of {bound}, continued with a Decision"
    return f"{number} of {bound}"
