"""`make run` after the pull request: in `steelframe dev`, a person marks a check failed
with the sandbox's pull request page, and the demo runtime's fix run pushes a new commit to
the same pull request (the page then shows it)."""

from __future__ import annotations

import re
import urllib.parse
import urllib.request

import pytest

from tests.test_dev_demo_loop import Dev, _page, _until
from tests.test_dev_demo_loop import dev as dev  # the `dev` fixture

FORM = re.compile(
    r'<form method="post" action="(?P<action>[^"]+/checks)"[^>]*>\s*'
    r'<input type="hidden" name="token" value="(?P<token>[0-9a-f]+)">'
)


@pytest.mark.slow
def test_a_check_marked_failed_on_the_page_gets_a_fix_run_from_the_demo_runtime(
    dev: Dev,
) -> None:
    filed = dev.chat("file an issue for the login page, blank after a wrong password")
    number = filed["filed_issue_number"]
    task = dev.wait_for(number, "delivered")
    page = _page(task["pr_url"])
    form = FORM.search(page)
    assert form is not None, page
    fields = {"token": form["token"], "name": "tests", "message": "login still blank"}
    request = urllib.request.Request(
        urllib.parse.urljoin(task["pr_url"], form["action"]),
        data=urllib.parse.urlencode(fields).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # follows the 303
        assert response.status == 200
    # The fix run's commit: the note now records what CI reported, on the same pull request.
    _until(lambda: "CI failed on" in _page(task["pr_url"]), "the fix run's commit", dev)
    assert "login still blank" in _page(task["pr_url"])
    assert dev.wait_for(number, "delivered")["pr_url"] == task["pr_url"]
