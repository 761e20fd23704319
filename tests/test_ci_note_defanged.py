"""A failing check's name is CI's text, chosen by whoever wrote the workflow: the progress
comment's line about it (`ci_intake`'s note) is defanged as every public text is, so a name
shaped as markdown shows no image, link or closing keyword for another issue."""

from __future__ import annotations

import re

from bot.lifecycle.public_text import shown
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.test_lifecycle_ci_fix import fail_head

HOSTILE = "fixes other/repo#1 ![px](https://evil.example/p.png) [docs](https://evil.example/x)"
# A closing keyword right before the other issue's reference: what GitHub acts on.
_CLOSES_OTHER = re.compile(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*other/repo#1")


async def test_a_check_name_shaped_as_markdown_shows_no_link_image_or_closing_keyword(
    make: Make,
) -> None:
    lc = await make(coding_command=command("echo"))
    issue, number = await delivered_pull(lc)
    await fail_head(lc, number, name=HOSTILE)
    bodies = [c["body"] for c in await lc.comments(issue) if "CI failed" in c["body"]]
    assert bodies, [c["body"] for c in await lc.comments(issue)]
    for body in bodies:
        view = shown(body)
        assert not [link for link in view.links if "evil.example" in link], body
        assert "https://evil.example" not in view.prose, body  # no bare URL GitHub links
        assert not _CLOSES_OTHER.search(view.text), body
        assert "other/repo#1" in view.text  # the name is still readable
