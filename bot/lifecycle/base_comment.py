"""The one comment on a pull request whose conflict with its base Steelframe stopped
working on (the bound was spent, or an update run could not resolve it): marked per
(base, head) pair, posted once (looked up first: a retry after a crash finds it; one
GitHub refused is posted by the reconciler, bot.lifecycle.base_intake.comment_stop), and
edited in place when a Decision's update run of the same pair stops again.

Its text is the worker's own words, the base branch's name reduced to the characters a
plain branch name has, and the row's reason, which is stored already made public
(`Run.public`: redacted, flattened, defanged)."""

from __future__ import annotations

import logging
import re

from bot.lifecycle.base_models import BaseUpdate
from bot.lifecycle.ci_summary import CommentApi

log = logging.getLogger(__name__)
_UNSAFE_IN_REF = re.compile(r"[^\w./-]")


def shown_ref(ref: str) -> str:
    """A branch name for a code span in public text: a name is data (anyone with write
    access names branches), so any character a plain name lacks is shown as "?"."""
    return _UNSAFE_IN_REF.sub("?", ref)[:100]


def marker(row: BaseUpdate) -> str:
    return f"<!-- steelframe-base-update {row.base_sha[:12]} {row.head_sha[:12]} -->"


def stop_body(row: BaseUpdate) -> str:
    base = shown_ref(row.base_ref)
    lines = [
        marker(row),
        f"**This pull request has merge conflicts with `{base}`, and Steelframe stopped "
        "updating it.**",
        "",
        f"- The base `{base}` is at {row.base_sha[:12]}; this branch at {row.head_sha[:12]}.",
        f"- Why it stopped: {row.reason}.",
        "",
        f"A person needs to merge `{base}` into this branch, resolve the conflicts and push "
        "(or rebase it), or to publish a Decision on the issue: Steelframe then tries one "
        "more update run, with the Decision as its guidance. Merging or closing the pull "
        "request ends the task as usual.",
    ]
    return "\n".join(lines) + "\n"


async def post_stop(github: CommentApi, repo: str, row: BaseUpdate) -> int | None:
    """The stop's comment on the row's pull request, unless the App posted it already (an
    earlier stop of the pair, before a Decision's update run stopped again: edited to say
    this stop's reason); its id (None if GitHub failed: logged, and the next delivery about
    the pair, or the reconciler, posts it)."""
    mark, body = marker(row), stop_body(row)
    try:
        for comment in await github.list_comments(repo, row.pr_number):
            if mark in comment.body and await github.is_app_login(comment.author):
                if comment.body != body:
                    await github.update_comment(repo, comment.id, body)
                return comment.id
        return (await github.create_comment(repo, row.pr_number, body)).id
    except Exception as exc:
        log.warning(
            "lifecycle: base update comment on %s#%s not posted: %s", repo, row.pr_number, exc
        )
        return None
