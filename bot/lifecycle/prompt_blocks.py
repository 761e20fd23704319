"""Untrusted text in a coding run's prompt stays data: every block the worker marks data
with (the issue, retrieved memory, review threads, CI's evidence, a test run's output, a
question, the operator's guidance) holds text from outside, and none of that text can
close its block or open another, whatever its case or spacing (`</ISSUE >` too). The
instructions around the blocks are the worker's own words.

One list of tags for every prompt the worker writes (bot.lifecycle.prompt,
bot.lifecycle.review_prompt, bot.lifecycle.ci_prompt, bot.lifecycle.repo_tests,
bot.lifecycle.base_prompt): a tag
added to one prompt is defused in the text of all of them.
"""

from __future__ import annotations

import re

DATA_TAGS = (
    "issue",
    "context",
    "ci-evidence",
    "ci-question",
    "operator-guidance",
    "test-output",
    "review-thread",
    "merge-conflicts",
    "update-question",
)

# A `<` that starts one of the tags, opening or closing: it gets a backslash after it
# (`<\/issue>`), which no reader takes for the tag and a person still reads.
_NAMES = "|".join(DATA_TAGS)
_TAG = re.compile(rf"<(?=\s*/?\s*(?:{_NAMES})(?![\w-]))", re.IGNORECASE)


def defused(text: str) -> str:
    """`text` with no tag that could open or close one of the prompt's data blocks."""
    return _TAG.sub("<\\\\", text)


def one_line(text: str) -> str:
    """`text` for a place in one of the worker's own lines (an issue's title): defused, its
    line breaks made spaces, so it cannot start a line of its own."""
    return " ".join(defused(text).split())
