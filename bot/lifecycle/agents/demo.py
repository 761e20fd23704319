"""The demo coding runtime `steelframe dev` uses when no real agent is configured.

It speaks the coding-command protocol (docs/lifecycle.md, "The coding command") and
changes no code: it writes `notes/issue-N.md` (the issue title, the issue text it was
given, the Decisions received, and how to configure a real agent), so the worker commits,
pushes and opens a real pull request. An issue whose text is shorter than a sentence gets
a question first, so the Discuss -> Decision -> Publish -> resume loop shows too. On a
review run (the prompt carries `<review-thread>` blocks) it adds the review to the note
and answers every thread `addressed` in `.steelframe/review-answers.json`, so review ->
fix commit -> reply shows as well. A fix run for failing CI adds what CI reported to
the note, keeping what earlier runs wrote.

Run as a script (`python demo.py`): standard library only, so it runs wherever the coding
sandbox can run a Python file.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

# "Shorter than a sentence": fewer words than this, or no text at all. A word is a run of
# letters or digits (with inner ' or -): a quote mark, a dash or "#12" alone never counts,
# so the same request asks or not whatever punctuation or quoting came with it.
MIN_WORDS = 5
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
CONFIGURE = (
    "To have a real coding agent do the work, set `STEELFRAME_CODING_AGENT` to `claude`, "
    "`codex` or `aider` (or `STEELFRAME_CODING_COMMAND` to any command speaking the "
    "coding-command protocol); see docs/runtimes.md."
)
QUESTION = (
    "The demo runtime asks this because the issue says less than a sentence (fewer than five "
    "words): what should "
    "change, and how will we know it is done? Answer in Chat (Discuss this issue, then "
    "Publish the Decision) and the task resumes."
)
# The worker defuses a tag in text from outside with a backslash after its `<`
# (bot.lifecycle.prompt_blocks): the note shows the text as its author wrote it.
_DEFUSED = re.compile(r"<\\(?=\s*/?\s*[A-Za-z])")
_TITLE = re.compile(r"^You are working on issue #\d+ of \S+: (?P<title>.*)$", re.MULTILINE)
# What Steelframe itself adds to an issue it files from Chat: markers, its preamble, a
# "Related" line, and the operator's imperative ("file an issue for ...") in the quote.
_MARKER = re.compile(r"<!--.*?-->", re.DOTALL)
_PREAMBLE = re.compile(r"^(Filed from Steelframe Chat\b.*|Related: #\d+)$", re.IGNORECASE)
_IMPERATIVE = re.compile(
    r"^\s*(?:(?:please|can\s+you|could\s+you|would\s+you|let'?s|let\s+us)\s+)*"
    r"(?:please\s+)?(?:file|open|create|make)\s+(?:an?\s+)?(?:new\s+)?"
    r"(?:issue|task|work|ticket|bug)\b(?:\s+(?:for|to|about|on)\b)?\s*:?\s*",
    re.IGNORECASE,
)


_THREAD = re.compile(r'^<review-thread id="(?P<id>[^"]+)"[^>]*>$')
ANSWERS = Path(".steelframe") / "review-answers.json"


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


def title_of(prompt: str) -> str:
    found = _TITLE.search(prompt)
    return restored(found.group("title").strip()) if found else "(untitled)"


def restored(text: str) -> str:
    """Text from the prompt's data as its author wrote it (the worker's defusing undone)."""
    return _DEFUSED.sub("<", text)


def issue_text_of(prompt: str) -> str:
    """The issue text between the prompt's `<issue>` lines (the worker's own delimiters)."""
    lines = prompt.splitlines()
    try:
        start = lines.index("<issue>")
    except ValueError:
        return ""
    # The worker's own closing line: the text cannot hold one (bot.lifecycle.prompt_blocks).
    end = lines.index("</issue>", start) if "</issue>" in lines[start:] else len(lines)
    text = restored("\n".join(lines[start + 1 : end]).strip())
    return "" if text == "(empty)" else text


def request_of(text: str) -> str:
    """The words someone wrote to ask for the change, without what Steelframe adds when it
    files from Chat (so "file an issue for the flaky test" counts as four words)."""
    kept = []
    for line in _MARKER.sub("", text).splitlines():
        line = line.strip().removeprefix(">").strip()
        if line and not _PREAMBLE.match(line):
            kept.append(_IMPERATIVE.sub("", line, count=1))
    return " ".join(kept)


def words_in(text: str) -> int:
    """Words, not tokens: "#12" (a reference) and punctuation alone are not words."""
    return len(_WORD.findall(re.sub(r"#\d+", " ", text)))


def too_short(text: str) -> bool:
    return words_in(request_of(text)) < MIN_WORDS


def quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def note(issue: str, title: str, text: str, decisions: list[str]) -> str:
    received = "\n\n".join(quoted(d) for d in decisions) if decisions else "None."
    return (
        f"# Issue #{issue}: {title}\n\n"
        "This note was made by Steelframe's **demo runtime**. It changes no code: it wrote "
        "this file so that the whole loop (issue, task, branch, pull request) can be seen "
        f"without a coding agent. {CONFIGURE}\n\n"
        "## Issue text\n\n"
        f"{quoted(text) if text else '(empty)'}\n\n"
        "## Decisions received\n\n"
        f"{received}\n"
    )


def review_threads_of(prompt: str) -> list[tuple[str, str]]:
    """(id, text) of each `<review-thread>` block of a review run's prompt."""
    threads: list[tuple[str, str]] = []
    current: tuple[str, list[str]] | None = None
    for line in prompt.splitlines():
        found = _THREAD.match(line)
        if found:
            current = (found.group("id"), [])
        elif line == "</review-thread>" and current is not None:
            threads.append((current[0], "\n".join(current[1]).strip()))
            current = None
        elif current is not None:
            current[1].append(line)
    return threads


def answer_review(path: Path, threads: list[tuple[str, str]]) -> int:
    """The review added to the note, and every thread answered."""
    if ANSWERS.parent.is_symlink() or ANSWERS.is_symlink():
        emit(type="result", status="error", error=".steelframe is a link in this repository")
        return 0
    done = path.read_text() if path.is_file() else "# Issue notes\n"
    section = "".join(f"\n### `{key}`\n\n{quoted(text) or '>'}\n" for key, text in threads)
    path.write_text(f"{done.rstrip()}\n\n## Review answered\n{section}")
    entries = [
        {"thread": key, "status": "addressed", "text": f"The demo runtime added it to `{path}`."}
        for key, _ in threads
    ]
    ANSWERS.parent.mkdir(exist_ok=True)
    ANSWERS.write_text(json.dumps({"threads": entries}))
    emit(type="log", text=f"demo runtime: answered {len(threads)} review thread(s) in {path}")
    summary = f"Made by Steelframe's demo runtime: it added the review to `{path}`. {CONFIGURE}"
    emit(type="result", status="done", summary=summary)
    return 0


_CI = re.compile(r"<ci-evidence>\n(?P<evidence>.*)\n</ci-evidence>", re.DOTALL)
_CI_HEAD = re.compile(r"its CI failed on the head commit (?P<sha>[0-9a-f]+)")


def ci_note(prompt: str) -> str | None:
    """A fix run for failing CI (bot.lifecycle.ci_prompt): a note of what CI reported, one
    section per failing head commit, so each fix run commits something; None otherwise."""
    found, head = _CI.search(prompt), _CI_HEAD.search(prompt)
    if found is None:
        return None
    sha = head.group("sha") if head else "unknown"
    return (
        f"## CI failed on {sha}\n\n"
        "The demo runtime changes no code, so it records what CI reported; a real agent "
        f"would fix it. {CONFIGURE}\n\n{quoted(found.group('evidence'))}\n"
    )


def record_ci(path: Path, ci: str, fresh: str) -> int:
    """A fix run adds what CI reported to the note the branch already has (what earlier
    runs wrote, a review answered or an earlier failure, stays); `fresh` only where the
    branch has no note yet."""
    done = path.read_text() if path.is_file() else fresh
    path.write_text(f"{done.rstrip()}\n\n{ci}")
    emit(type="log", text=f"demo runtime: added the CI failure to {path}")
    summary = (
        f"Made by Steelframe's demo runtime: it added what CI reported to `{path}` and "
        f"changed no code. {CONFIGURE}"
    )
    emit(type="result", status="done", summary=summary)
    return 0


def plan(issue: str, title: str) -> str:
    """What the demo runtime plans in a plan-first task's read-only run."""
    return (
        f"Files to change: notes/issue-{issue}.md (a new note; no code).\n"
        f"Approach: write the issue's title ({title}), its text and the Decisions received "
        "into the note, so the whole loop can be seen without a coding agent.\n"
        "Risks: none; the demo runtime changes no code.\n"
        "Test to run: none (the note is the change).\n"
        "Estimate: one short run, no tokens (the demo runtime calls no model)."
    )


def main() -> int:
    prompt = sys.stdin.read()
    issue = os.environ.get("STEELFRAME_ISSUE", "0")
    decision = os.environ.get("STEELFRAME_DECISION", "").strip()
    text = issue_text_of(prompt)
    if not decision and too_short(text) and not review_threads_of(prompt):
        emit(type="log", text="demo runtime: the issue text is shorter than a sentence")
        emit(type="result", status="question", question=QUESTION)
        return 0
    if os.environ.get("STEELFRAME_MODE") == "plan":  # read-only: plan, change nothing
        emit(type="result", status="done", summary=plan(issue, title_of(prompt)))
        return 0
    path = Path("notes") / f"issue-{issue}.md"
    if not issue.isdigit() or path.parent.is_symlink() or path.is_symlink():
        # The repository is someone else's: never write through a link it planted.
        emit(type="result", status="error", error="notes/ is a link in this repository")
        return 0
    path.parent.mkdir(exist_ok=True)
    threads = review_threads_of(prompt)
    if threads:
        return answer_review(path, threads)
    if (ci := ci_note(prompt)) is not None:
        return record_ci(path, ci, note(issue, title_of(prompt), text, []))
    path.write_text(note(issue, title_of(prompt), text, [decision] if decision else []))
    emit(type="log", text=f"demo runtime: wrote {path}")
    emit(
        type="result",
        status="done",
        summary=(
            f"Made by Steelframe's demo runtime: it wrote `{path}` (the issue text and the "
            f"Decisions received) and changed no code. {CONFIGURE}"
        ),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
