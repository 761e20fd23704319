"""Runtime text published on GitHub: no closing keyword for another issue, no mention, no
link off the repository's host; the task's own closing keyword stays."""

from __future__ import annotations

import re

import pytest

from bot.lifecycle.public_text import PublicPlace, defang, web_host
from bot.lifecycle.redact import Redactor
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.lifecycle import Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

PLACE = PublicPlace(repo="owner/repo", issue=5, host="github.com")
# What GitHub would act on: a closing keyword before a reference (its rule, loosely: any
# markup or colon between), a mention, a URL or link target on another host.
CLOSES = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:*_~`\[]*"
    r"(?:[\w.-]+/[\w.-]+)?(?:#|GH-|https?://\S+/(?:issues|pull)/)(\d+)",
    re.IGNORECASE,
)
MENTION = re.compile(r"@[A-Za-z0-9]")


def _clickable_hosts(text: str) -> set[str]:
    """Hosts of links GitHub would render outside code spans: markdown links and images,
    autolinks, bare URLs."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # fenced: never a link
    prose = re.sub(r"(?<![\\`])(`+).*?\1", "", prose)
    found = re.findall(r"\]\(\s*<?(?:https?:)?//([^/\s)>]+)", prose)
    found += re.findall(r"(?:https?://|www\.)([^/\s)>`]+)", prose)
    return {host.lower().removeprefix("www.") for host in found}


def _assert_harmless(text: str) -> None:
    assert [m.group(1) for m in CLOSES.finditer(text)] in ([], ["5"]), text
    assert not MENTION.search(text), text
    assert _clickable_hosts(text) <= {"github.com"}, text


@pytest.mark.parametrize(
    "text",
    [
        "Closes #1, fixes #2 and resolves owner/repo#3",
        "FIXED: #9, Resolved:#10, close GH-11, closes https://github.com/other/x/issues/12",
        "fixes https://evil.example/owner/repo/issues/5",  # the own number on another host
        "resolves other/repo#5",  # the own number in another repository
        "close closes #2",  # dropping one keyword must not make another
        "**Closes** #3 and _fixes_ #4 and fixes [#6](https://github.com/owner/repo/issues/6)",
        "`fixes #2` inside a code span, ```closes #3``` too",
        "`https://evil.example/unclosed`` and ``a` https://evil.example/in-a-span ``",
        "Ｃｌｏｓｅｓ ＃１ and ｆｉｘｅｓ：＃２",  # fullwidth lookalikes NFKC turns into ASCII
        "clo\u200bses #1 and fi\u00adxes #2 and re\ufeffsolves #3",  # invisible characters
        "@maintainer @org/team ＠fullwidth a@b.example @\u200bsplit",
        "see [docs](https://evil.example/x) and ![px](https://evil.example/p.png 'title')",
        "[[nested](https://evil.one)](https://github.com/owner/repo) [[x](/ok)](https://evil.two)",
        "[a [b [c](https://deep.evil)](https://evil.mid)](https://evil.out)",
        "bare https://evil.example/y, www.evil.com. ｈｔｔｐｓ：／／fullwidth.evil/z",
        "[ref]: https://evil.example/r\n[ref]: //evil.example/p\n[text][ref]",
        "[x](javascript:alert(1)) [y](mailto:a@evil.example) [z](//evil.example/q)",
        "[code `span`](https://evil.example/c) and `https://evil.example/in-code`",
        r"\`https://evil.example/escaped\` is prose, not code",
        "```\nfixes #2 https://evil.example/in-fence @someone\n```\nafter the fence https://evil.example/a",
    ],
)
def test_nasty_runtime_text_is_defanged(text: str) -> None:
    _assert_harmless(defang(text, PLACE))


def test_the_tasks_own_closing_keyword_and_own_links_stay() -> None:
    text = (
        "Fixes #5. Also closes owner/repo#5 and resolves https://github.com/owner/repo/issues/5. "
        "See [the PR](https://github.com/owner/repo/pull/7), https://github.com/owner/repo and "
        "[a relative link](docs/guide.md)."
    )
    assert defang(text, PLACE) == text


def test_what_stays_readable() -> None:
    shown = defang(
        "Closes #1; cc @maintainer; see [docs](https://evil.example/x) or https://evil.example/y.",
        PLACE,
    )
    assert shown == (
        "#1; cc @\u200bmaintainer; see docs (https:\u200b//evil.example/x) or "
        "https:\u200b//evil.example/y."
    )


@pytest.mark.parametrize(
    ("api", "host"),
    [
        ("https://api.github.com", "github.com"),
        ("https://ghe.example.com/api/v3", "ghe.example.com"),
        ("http://127.0.0.1:9000", "127.0.0.1"),
    ],
)
def test_the_repository_host_comes_from_the_api_url(api: str, host: str) -> None:
    assert web_host(api) == host


async def test_a_delivered_pull_request_body_carries_none_of_it(make: Make) -> None:
    summary = (
        "Closes #101, fixes #102 and resolves owner/repo#103. Ｆｉｘｅｓ ＃１０４.\n"
        "Thanks @maintainer! Details: [report](https://evil.example/r), "
        "https://evil.example/bare ![px](https://evil.example/p.png)"
    )
    lc = await make(coding_command=command("say", summary))
    issue = await lc.open_issue()
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    body = pull["body"]
    place = PublicPlace.of(lc.repo, issue, lc.settings.github_api_url)
    assert body.startswith(f"Fixes #{issue}\n")  # the task's own keyword, kept
    assert [m.group(1) for m in CLOSES.finditer(body)] == [str(issue)]
    assert not MENTION.search(body)
    assert _clickable_hosts(body) <= {place.host}
    assert "@\u200bmaintainer" in body and "report (https:\u200b//evil.example/r)" in body


# Secrets the worker never knew, as an agent may print them (one it found in the checkout,
# in its tools' output): each shaped like a GitHub, model or cloud key, or a header's value.
FOUND_SECRETS = (
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "sk-proj-abcdefghijklmnopqrstuvwxyzABCDEF0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
    "abc.def.ghi-from-a-header",
)
LEAKY = (
    f"Done. Pushed with {FOUND_SECRETS[0]} (or {FOUND_SECRETS[1]}); the model key is "
    f"{FOUND_SECRETS[2]}, AWS {FOUND_SECRETS[3]}, Slack {FOUND_SECRETS[4]}.\n"
    f"curl -H 'Authorization: Bearer {FOUND_SECRETS[5]}' worked."
)


def test_token_shaped_secrets_the_worker_never_knew_are_masked_in_public_text() -> None:
    redactor = Redactor()  # knows no value: only the shapes can catch these
    for public in (redactor.public_text(LEAKY, 1000), redactor.public_block(LEAKY)):
        assert not [s for s in FOUND_SECRETS if s in public], public
        assert public.startswith("Done. Pushed with [REDACTED]") and "worked." in public


async def test_a_delivered_pull_request_and_its_comment_carry_no_token_shaped_secret(
    make: Make,
) -> None:
    lc = await make(coding_command=command("say", LEAKY))
    issue = await lc.open_issue()
    await lc.work()
    assert lc.task(issue).state == TaskState.DELIVERED
    [pull] = await lc.pulls()
    published = [pull["body"], *(c["body"] for c in await lc.comments(issue))]
    assert all("Done. Pushed with [REDACTED]" in text for text in published[:2]), published
    assert not [s for text in published for s in FOUND_SECRETS if s in text], published
