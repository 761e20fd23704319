"""A known secret written down wrapped, as `base64` (76 columns), `openssl base64` (64) and
`xxd -p` (hex, 60) write it, is still the secret: masked in what a run publishes (its
summary, in the pull request's body) and found by the push scan (its patch lines start with
`+`), so the push is refused and the task fails, as for the secret written whole."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bot.lifecycle.branch import SECRET_FOUND
from bot.lifecycle.public_text import PublicPlace, defang, normalize, shown
from bot.lifecycle.push_scan import history_holds
from bot.lifecycle.redact import MASK, Redactor
from bot.lifecycle.states import TaskState
from tests.fakes.coding import command
from tests.fakes.git import committed_over_base
from tests.fakes.lifecycle import Lifecycle, Make
from tests.fakes.lifecycle import make_fixture as make_fixture  # the `make` fixture

KEY = "sk-ant-api03-" + "Qx7vR2mN9pL4kJ8hG3fD6sA1zX5cV0bN" * 3 + "-AbCdEfGhIj"
PLACE = PublicPlace(repo="owner/repo", issue=5, host="github.com")
COLUMNS = {"base64": 76, "openssl": 64, "xxd": 60}  # as each tool wraps by default


def _wrapped(encoder: str, raw: bytes = KEY.encode(), width: int | None = None) -> str:
    """What the tool writes (the same as tests/fakes/coding/wrapped_leak.py), at its own
    width or `width` (`xxd -p -c 8` writes 16 columns)."""
    whole = raw.hex() if encoder == "xxd" else base64.b64encode(raw).decode()
    width = width or COLUMNS[encoder]
    return "".join(whole[at : at + width] + "\n" for at in range(0, len(whole), width))


def _shows_key(text: str) -> bool:
    """Whether `text` holds the key, or 24 characters in a row of its base64 or hex, however
    whitespace splits them: read without the redactor, so it cannot share its blind spots."""
    joined = "".join(text.split())
    raw = KEY.encode()
    encodings = (base64.b64encode(raw).decode(), raw.hex(), raw.hex().upper())
    pieces = (form[at : at + 24] for form in encodings for at in range(len(form) - 23))
    return KEY in text or any(piece in joined for piece in pieces)


@pytest.mark.parametrize("encoder", sorted(COLUMNS))
def test_a_wrapped_key_is_masked_in_a_public_block(encoder: str) -> None:
    written = _wrapped(encoder)
    assert _shows_key(written)  # the oracle sees it
    text = f"Added the key:\n{written}Done."
    published = defang(Redactor([KEY]).public_block(normalize(text)), PLACE)  # Run.public_block
    assert not _shows_key(published), published
    assert published == f"Added the key:\n{MASK}\nDone."


@pytest.mark.parametrize("encoder", sorted(COLUMNS))
def test_a_wrapped_key_hidden_by_markup_is_masked_as_a_reader_sees_it(encoder: str) -> None:
    # An HTML comment at each line's end: the source's lines do not join into the form,
    # the lines GitHub shows do.
    written = "".join(f"{line}<!-- -->\n" for line in _wrapped(encoder).splitlines())
    published = defang(Redactor([KEY]).public_block(normalize(f"Key:\n{written}")), PLACE)
    assert not _shows_key(published), published
    assert MASK in shown(published).text  # published escaped, as a reader would see it


@pytest.mark.parametrize("encoder", sorted(COLUMNS))
def test_a_wrapped_key_is_found_in_a_patch_and_in_a_file(encoder: str) -> None:
    written = _wrapped(encoder)
    patch = "".join(f"+{line}\n" for line in written.splitlines())
    redactor = Redactor([KEY])
    assert redactor.contains_secret(written)
    assert redactor.contains_secret(f"diff --git a/k b/k\n@@ -0,0 +1,3 @@\n{patch}")
    assert not redactor.contains_secret(_wrapped(encoder, b"an ordinary text of some length"))


@pytest.mark.parametrize(
    ("encoder", "width"), [*((encoder, None) for encoder in sorted(COLUMNS)), ("xxd", 16)]
)
@pytest.mark.parametrize("offset", range(0, 300, 37))
async def test_a_wrapped_key_cut_by_a_chunk_boundary_is_still_found(
    tmp_path: Path, encoder: str, width: int | None, offset: int
) -> None:
    text = "x" * offset + "\n" + _wrapped(encoder, width=width) + "y" * 500
    tree = committed_over_base(tmp_path, "key.txt", text)
    redactor = Redactor([KEY])
    # Chunks shorter than the wrapped key: it is always cut, at a place `offset` moves.
    for chunk in (64, 100):
        found = redactor.contains_secret
        assert await history_holds(tree, found, overlap=redactor.longest_value, chunk=chunk)


async def _leaked(
    make: Make, monkeypatch: pytest.MonkeyPatch, encoder: str, where: str
) -> tuple[Lifecycle, int]:
    """A task run by an agent that writes the model key wrapped by `encoder` into its
    change ("commit") or its summary ("summary"): the lifecycle and the issue."""
    monkeypatch.setenv("FAKE_MODEL_API_KEY", KEY)
    lc = await make(
        coding_command=command("wrapped_leak", encoder, where),
        coding_env_passthrough=("FAKE_MODEL_API_KEY",),
    )
    issue = await lc.open_issue("Deploy it")
    await lc.work()
    return lc, issue


@pytest.mark.parametrize("encoder", sorted(COLUMNS))
async def test_a_wrapped_key_in_the_change_is_not_pushed_and_the_task_fails(
    make: Make, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    lc, issue = await _leaked(make, monkeypatch, encoder, "commit")
    task = lc.task(issue)
    assert task.state == TaskState.FAILED and task.attempts == 1  # not retried
    assert lc.branch_file("deploy/key.txt", f"steelframe/issue-{issue}") is None
    assert await lc.pulls() == []
    comments = "\n".join(c["body"] for c in await lc.comments(issue))
    assert SECRET_FOUND in comments
    assert not _shows_key(comments), comments


@pytest.mark.parametrize("encoder", sorted(COLUMNS))
async def test_a_wrapped_key_in_the_summary_is_masked_in_the_pull_request(
    make: Make, monkeypatch: pytest.MonkeyPatch, encoder: str
) -> None:
    lc, issue = await _leaked(make, monkeypatch, encoder, "summary")
    assert lc.task(issue).state == TaskState.DELIVERED
    (pull,) = await lc.pulls()
    assert "Added the key:" in pull["body"] and MASK in pull["body"], pull["body"]
    assert not _shows_key(pull["body"]), pull["body"]
    assert not _shows_key("\n".join(c["body"] for c in await lc.comments(issue)))
