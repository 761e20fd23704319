"""The agent's answers file is hostile input: read only as a plain file of bounded size,
decoded strictly, never committed; threads it does not answer get the worker's answer."""

from __future__ import annotations

import json
from pathlib import Path

from bot.lifecycle.models import ReviewThread, ThreadState
from bot.lifecycle.review_answers import (
    ANSWERS_FILE,
    MAX_ANSWERS_BYTES,
    NOTHING_DONE,
    settle,
    take_answers,
)


def _thread(root: int) -> ReviewThread:
    return ReviewThread(kind="comment", root_id=root, url=f"https://example/{root}")


def _write(tree: Path, text: str) -> Path:
    path = tree / ANSWERS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_good_file_is_read_and_removed(tmp_path: Path) -> None:
    entries = [{"thread": "comment:1", "status": "declined", "text": "Out of scope."}]
    path = _write(tmp_path, json.dumps({"threads": entries}))
    given = take_answers(tmp_path)
    assert given is not None and given.threads[0].text == "Out of scope."
    assert not path.exists()  # never committed


def test_links_oversize_and_unknown_fields_are_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"threads": []}))
    tree = tmp_path / "tree"
    (tree / ".steelframe").mkdir(parents=True)
    (tree / ANSWERS_FILE).symlink_to(outside)
    assert take_answers(tree) is None and outside.exists()
    _write(tree / "big", "x" * (MAX_ANSWERS_BYTES + 1))
    assert take_answers(tree / "big") is None
    _write(tree / "odd", json.dumps({"threads": [], "run": "rm -rf /"}))
    assert take_answers(tree / "odd") is None
    _write(tree / "bad", json.dumps({"threads": [{"thread": "comment:1", "status": "maybe"}]}))
    assert take_answers(tree / "bad") is None


def test_unanswered_threads_get_the_workers_answer_and_strangers_are_dropped(
    tmp_path: Path,
) -> None:
    entries = [
        {"thread": "comment:1", "status": "question", "text": "Which blue?"},
        {"thread": "comment:99", "status": "addressed", "text": "Not this run's thread."},
    ]
    _write(tmp_path, json.dumps({"threads": entries}))
    given = take_answers(tmp_path)
    threads = [_thread(1), _thread(2)]
    with_commit = settle(threads, given, "abc123", str.upper)
    assert [(a.root_id, a.state, a.text) for a in with_commit.answers] == [
        (1, ThreadState.NEEDS_OPERATOR, "WHICH BLUE?"),  # the text passed through `public`
        (2, ThreadState.ADDRESSED, ""),
    ]
    assert with_commit.answers[1].commit == "abc123" and len(with_commit.questions) == 1
    nothing = settle(threads, None, None, str)
    assert [(a.state, a.text) for a in nothing.answers] == [
        (ThreadState.NEEDS_OPERATOR, NOTHING_DONE),
        (ThreadState.NEEDS_OPERATOR, NOTHING_DONE),
    ]
    assert nothing.questions == []
