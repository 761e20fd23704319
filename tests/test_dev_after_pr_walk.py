"""`make run` walks the whole loop from the sandbox's pages, as a newcomer would: an issue
filed in Chat becomes a pull request; a review comment left with the pull request page's
form gets the demo runtime's commit and a reply on its thread; a check marked failed with
the page's form gets a fix run's commit; the page's merge form ends the task `merged`.
What a person checks: the page shows the reply and the commits' changes, the task JSON
says merged (with the thread addressed and the CI fix run pushed), and every link opens,
the commit pages the GUI links included."""

from __future__ import annotations

import html
import re
import urllib.parse
import urllib.request
from typing import Any

import pytest

from tests.test_dev_demo_loop import Dev, _page, _until
from tests.test_dev_demo_loop import dev as dev  # the `dev` fixture

REVIEW = "Please also say which page goes blank."


def _form(page: str, form_id: str) -> tuple[str, dict[str, str]]:
    """The page's form `form_id`: its action and its hidden token."""
    found = re.search(
        rf'<form method="post" action="(?P<action>[^"]+)" class="act" id="{form_id}">\s*'
        r'<input type="hidden" name="token" value="(?P<token>[0-9a-f]+)">',
        page,
    )
    assert found is not None, f"no {form_id} on the page:\n{page}"
    return found["action"], {"token": found["token"]}


def _post(pr_url: str, form_id: str, fields: dict[str, str]) -> str:
    """Submit the pull request page's form as a browser would; the page it lands on."""
    action, hidden = _form(_page(pr_url), form_id)
    request = urllib.request.Request(
        urllib.parse.urljoin(pr_url, action),
        data=urllib.parse.urlencode({**hidden, **fields}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # follows the 303
        assert response.status == 200
        return str(response.read().decode())


def _detail(dev: Dev, task_id: int) -> dict[str, Any]:
    found: dict[str, Any] = dev.call("GET", f"/api/operator/tasks/{task_id}")
    return found


def _head(page: str) -> str:
    found = re.search(r'<h2 id="checks">Checks on <code>([0-9a-f]{7})</code>', page)
    assert found is not None, page
    return found[1]


@pytest.mark.slow
def test_make_run_walks_issue_pr_review_fix_ci_fix_and_merge_from_the_pages(dev: Dev) -> None:
    filed = dev.chat("file an issue for the login page, blank after a wrong password")
    number = filed["filed_issue_number"]
    task = dev.wait_for(number, "delivered")
    pr_url = task["pr_url"]
    note = f"notes/issue-{number}.md"
    first = _head(_page(pr_url))

    # A review comment on the note's first line, left with the page's form.
    _post(pr_url, "review-form", {"path": note, "line": "1", "body": REVIEW})

    def answered() -> dict[str, Any] | None:
        detail = _detail(dev, task["id"])
        threads = detail["review_threads"]
        done = detail["state"] == "delivered" and threads and threads[0]["state"] == "addressed"
        return detail if done else None

    detail = _until(answered, "the review run's answer", dev)
    (thread,) = detail["review_threads"]
    assert thread["author"] and thread["commit"] and detail["ready_for_review"]
    page = html.unescape(_page(pr_url))
    assert REVIEW in page  # the comment, quoted into the note by the demo runtime's commit
    assert f"The demo runtime added it to `{note}`." in page  # the reply on the thread
    assert "## Review answered" in page
    reviewed = _head(page)
    assert reviewed != first and thread["commit"].startswith(reviewed)

    # A check marked failed on the new head, with the page's form: a fix run's commit.
    _post(pr_url, "fail-check-form", {"name": "tests", "message": "login still blank"})
    _until(lambda: "CI failed on" in _page(pr_url), "the fix run's commit", dev)
    dev.wait_for(number, "delivered")
    page = html.unescape(_page(pr_url))
    assert "login still blank" in page and _head(page) != reviewed
    (fix,) = _until(lambda: _detail(dev, task["id"])["ci"], "the CI history", dev)
    assert (fix["head_sha"][:7], fix["checks"], fix["run"], fix["of"]) == (
        reviewed,
        ["tests"],
        1,
        2,
    )
    assert fix["outcome"] == "pushed" and fix["result_sha"].startswith(_head(page))

    # Merged with the page's form: the task is merged, for good; every link still opens.
    _post(pr_url, "merge-form", {})
    merged = dev.wait_for(number, "merged")
    assert merged["pr_state"] == "merged" and merged["pr_url"] == pr_url
    detail = _detail(dev, task["id"])
    assert "merged" in (detail["events"][-1]["detail"] or "")
    page = _page(pr_url)
    assert 'id="merge-form"' not in page  # nothing left to act on
    for link in (pr_url, thread["url"], filed["filed_issue_url"], f"{pr_url}.diff"):
        with urllib.request.urlopen(link, timeout=30) as response:
            assert response.status == 200, link
    # The commits the GUI's ledger and CI history link (…/commit/SHA) open on the sandbox.
    repo_url = pr_url.rsplit("/pull/", 1)[0]
    answer = html.unescape(_page(f"{repo_url}/commit/{thread['commit']}"))
    assert thread["commit"] in answer and REVIEW in answer and f"+++ b/{note}" in answer
    assert "login still blank" in html.unescape(_page(f"{repo_url}/commit/{fix['result_sha']}"))
