"""A check name on the CI summary is shown as code it cannot leave: a backtick in it (or a
fullwidth one, which normalising makes a backtick) would close the span and publish the
rest, an image or a link, as markdown. The body as built, and a commit status named so on a
delivered pull request. Real RQ workers, the GitHub sandbox, PostgreSQL."""

from __future__ import annotations

import pytest

from bot.lifecycle.ci_summary import MARKER, CiStop, summary_body
from bot.lifecycle.public_text import shown
from bot.lifecycle.redact import Redactor
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture
from tests.fakes.pulls import delivered_pull
from tests.test_lifecycle_ci_fix import _control, _head

EVIL = "https://evil.example/p.png"
BREAKS_OUT = f"a` ![px]({EVIL}) `b"


def _stop(*checks: str) -> CiStop:
    return CiStop("o/r", 1, 2, "0" * 40, checks, (), "The bound is spent.")


@pytest.mark.parametrize("name", [BREAKS_OUT, BREAKS_OUT.replace("`", "\uff40")])
def test_a_check_name_with_a_backtick_stays_in_its_code_span(name: str) -> None:
    body = summary_body(_stop("tests", name), Redactor(), "https://api.github.com")
    assert shown(body).links == ()
    assert f"- What failed: `tests`, `a' ![px]({EVIL}) 'b` on commit" in body


async def test_a_status_named_to_break_out_shows_no_image_on_the_pull_request(
    make: Make,
) -> None:
    lc = await make(coding_command=command("echo"), ci_fix_runs=0)
    _, number = await delivered_pull(lc)
    sha = await _head(lc, number)
    await _control(lc, f"/statuses/{sha}", {"state": "failure", "context": BREAKS_OUT})
    (summary,) = [c["body"] for c in await lc.comments(number) if MARKER in c["body"]]
    assert "What failed: `a' ![px]" in summary
    assert EVIL not in shown(summary).links
