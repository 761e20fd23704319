"""The demo coding runtime as the worker runs it: the coding-command protocol on stdin and
stdout, a question for an issue shorter than a sentence, a note for anything else."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bot.lifecycle.agents import demo
from bot.lifecycle.agents.presets import demo_command
from bot.lifecycle.ci_models import CiFix
from bot.lifecycle.ci_prompt import fix_prompt
from bot.lifecycle.models import ReviewThread
from bot.lifecycle.prompt import PromptInput, build_prompt
from bot.lifecycle.review_prompt import review_section

CHAT_BODY = (
    "Filed from Steelframe Chat at the operator's request:\n\n"
    "> file an issue for {what}\n\n<!-- steelframe-filing:abc -->"
)


def run_demo(tmp_path: Path, body: str, decision: str | None = None) -> list[dict[str, object]]:
    prompt = build_prompt(
        PromptInput(repo="o/r", issue=7, title="Fix </issue> login", body=body, branch="b")
    )
    env = {"STEELFRAME_ISSUE": "7", "PATH": "/usr/bin:/bin"}
    if decision:
        env["STEELFRAME_DECISION"] = decision
    done = subprocess.run(
        demo_command(), input=prompt, cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_chat_boilerplate_does_not_count_as_the_request() -> None:
    assert demo.request_of(CHAT_BODY.format(what="the flaky login test")) == "the flaky login test"
    assert demo.too_short(CHAT_BODY.format(what="the flaky login test"))
    assert not demo.too_short(CHAT_BODY.format(what="the login page, blank after a bad password"))
    assert demo.too_short("") and demo.too_short("Fix it.")


def test_the_sentence_rule_is_four_words_asked_five_not_whatever_the_wording() -> None:
    """Fewer than five words asks, five does not; the same request counts the same however
    it was asked or quoted, and punctuation or a `#N` alone is not a word."""
    four = [
        "file an issue for the flaky login test",
        "can you file an issue for the flaky login test?",
        "please file an issue: the flaky login test",
        "Let's open a new ticket about the flaky login test.",
        "file an issue for the flaky login test — #12",
    ]
    five = [
        "file an issue for fix the flaky login test",
        "could you file an issue for: fix the flaky login test!",
        'file an issue for "fix the flaky login test" (#12)',
    ]
    quoted = CHAT_BODY.replace("file an issue for {what}", "{what}")
    for request in four:
        body = quoted.format(what=request)
        assert demo.words_in(demo.request_of(body)) == 4, request
        assert demo.too_short(body), request
    for request in five:
        body = quoted.format(what=request)
        assert demo.words_in(demo.request_of(body)) == 5, request
        assert not demo.too_short(body), request


def test_a_short_issue_gets_a_question_and_no_note(tmp_path: Path) -> None:
    events = run_demo(tmp_path, CHAT_BODY.format(what="the flaky login test"))
    assert events[-1]["type"] == "result" and events[-1]["status"] == "question"
    assert "less than a sentence" in str(events[-1]["question"])
    assert not (tmp_path / "notes").exists()


def test_a_described_issue_gets_a_note_with_its_text_and_how_to_get_a_real_agent(
    tmp_path: Path,
) -> None:
    body = "The login page shows a blank screen after a wrong password.\n</issue>\nstill body"
    events = run_demo(tmp_path, body)
    assert events[-1]["status"] == "done" and "demo runtime" in str(events[-1]["summary"])
    note = (tmp_path / "notes" / "issue-7.md").read_text()
    assert note.startswith("# Issue #7: Fix </issue> login\n")
    assert "> The login page shows a blank screen" in note and "> still body" in note
    assert "**demo runtime**" in note and "STEELFRAME_CODING_AGENT" in note
    assert "## Decisions received\n\nNone." in note


def test_after_a_decision_the_note_carries_it(tmp_path: Path) -> None:
    events = run_demo(tmp_path, "", decision="Retry twice.\nThen log it.")
    assert events[-1]["status"] == "done"
    note = (tmp_path / "notes" / "issue-7.md").read_text()
    assert "## Issue text\n\n(empty)" in note
    assert "## Decisions received\n\n> Retry twice.\n> Then log it.\n" in note


def test_a_notes_link_planted_in_the_repository_is_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "notes").symlink_to(outside)
    events = run_demo(tmp_path, "The login page shows a blank screen after a wrong password.")
    assert events[-1]["status"] == "error"
    assert list(outside.iterdir()) == []


def test_a_review_run_adds_the_review_to_the_note_and_answers_each_thread(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "issue-7.md").write_text("# Issue #7: Fix login\n\nEarlier note.\n")
    thread = ReviewThread(kind="comment", root_id=41, path="notes/issue-7.md", line=1)
    thread.author, thread.text, thread.pinned = "maintainer", "Say which page.", None
    prompt = build_prompt(
        PromptInput(repo="o/r", issue=7, title="Fix login", body="Fix it.", branch="b")
    ) + review_section([thread])
    env = {"STEELFRAME_ISSUE": "7", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        demo_command(), input=prompt, cwd=tmp_path, env=env, capture_output=True, text=True
    )
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["status"] == "done"  # a review run is never asked the short-issue question
    note = (notes / "issue-7.md").read_text()
    assert note.startswith("# Issue #7: Fix login\n\nEarlier note.")
    assert "## Review answered" in note and "> Say which page." in note
    answers = json.loads((tmp_path / ".steelframe" / "review-answers.json").read_text())
    assert answers["threads"][0]["thread"] == "comment:41"
    assert answers["threads"][0]["status"] == "addressed"


def test_a_fix_run_adds_what_ci_reported_and_keeps_what_earlier_runs_wrote(
    tmp_path: Path,
) -> None:
    """README's loop: a review answered, then CI failed twice. Each fix run's commit adds its
    failure; the review and the first failure stay in the note, and the summary says so."""
    notes = tmp_path / "notes"
    notes.mkdir()
    earlier = (
        "# Issue #7: Fix login\n\n## Review answered\n\n### `comment:41`\n\n> Say which page.\n"
    )
    (notes / "issue-7.md").write_text(earlier)
    issue_prompt = build_prompt(
        PromptInput(
            repo="o/r",
            issue=7,
            title="Fix login",
            body="The login page is blank after a wrong password.",
            branch="b",
        )
    )
    env = {"STEELFRAME_ISSUE": "7", "PATH": "/usr/bin:/bin"}
    for head, said in (("a" * 40, "login test failed"), ("b" * 40, "lint failed")):
        row = CiFix(
            pr_number=8,
            head_sha=head,
            failing=[{"name": "tests", "conclusion": "failure"}],
            evidence=said,
        )
        done = subprocess.run(
            demo_command(),
            input=fix_prompt(issue_prompt, row),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        result = json.loads(done.stdout.splitlines()[-1])
        assert result["status"] == "done"
        assert "it added what CI reported to `notes/issue-7.md`" in result["summary"]
    note = (notes / "issue-7.md").read_text()
    assert note.startswith(earlier)
    assert f"## CI failed on {'a' * 12}" in note and "> login test failed" in note
    assert f"## CI failed on {'b' * 12}" in note and "> lint failed" in note
