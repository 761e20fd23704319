"""Session titles from the first message."""

from __future__ import annotations

from bot.dialogue.titles import issue_title, title_from_message


def test_short_message_is_the_title() -> None:
    assert title_from_message("  Why is CI red?  ") == "Why is CI red?"


def test_long_message_is_cut_on_a_word_boundary_within_60() -> None:
    message = "Please look into the flaky integration tests around the payment gateway retries"
    title = title_from_message(message)
    assert len(title) <= 60 and title.endswith("…")
    assert message.startswith(title[:-1])
    assert not title[:-1].endswith(" ")
    assert message[len(title) - 1] == " "  # the cut fell between words


def test_one_long_word_is_cut_hard() -> None:
    title = title_from_message("x" * 100)
    assert len(title) == 60 and title.endswith("…")


def test_newlines_are_flattened() -> None:
    assert title_from_message("line one\nline two") == "line one line two"


def test_issue_titles_never_start_with_punctuation() -> None:
    assert issue_title(": fix it") == "fix it"
    assert issue_title(" -- «Deploy»  broken\n now") == "«Deploy» broken now"
    assert issue_title("#42 regression") == "#42 regression"  # a reference, not punctuation
    assert issue_title("x" * 300) == "x" * 250
