"""Text analysis: stemming, identifiers, versions, references, the stop list, closing links."""

from __future__ import annotations

import pytest

from memory.analysis import STOP_WORDS, Analyzer, closing_references


@pytest.fixture(scope="module")
def analyzer() -> Analyzer:
    return Analyzer()


def test_inflections_share_one_stemmed_term(analyzer: Analyzer) -> None:
    assert analyzer.tokens("deploys deployed deploying deployment") == ["deploy"] * 4
    assert analyzer.tokens("Retries retried") == ["retri", "retri"]


def test_identifiers_are_kept_whole_and_split_into_parts(analyzer: Analyzer) -> None:
    assert analyzer.tokens("close_day") == ["close_day", "close", "day"]
    assert analyzer.tokens("TurnRegistry") == ["turnregistry", "turn", "registri"]
    assert analyzer.tokens("HTTPServerError") == ["httpservererror", "http", "server", "error"]
    assert analyzer.tokens("x-ratelimit-remaining")[:2] == ["x-ratelimit-remaining", "ratelimit"]
    # so the words of an identifier find it, and the identifier itself ranks it first
    assert set(analyzer.tokens("close day")) < set(analyzer.tokens("close_day"))


def test_an_acronyms_plural_is_the_acronym(analyzer: Analyzer) -> None:
    assert analyzer.tokens("PDFs URLs IDs") == analyzer.tokens("PDF URL ID") == ["pdf", "url", "id"]
    assert analyzer.tokens("PDFsidecar")[0] == "pdfsidecar"  # CamelCase stays CamelCase


def test_versions_and_references_are_single_terms(analyzer: Analyzer) -> None:
    assert analyzer.tokens("v0.9.0, 0.9.0 and 7.2.") == ["v0.9.0", "v0.9.0", "v7.2"]
    assert analyzer.tokens("see #123 and acme/app#45") == ["#123", "acm", "app", "#45"]
    assert analyzer.tokens("bot/chat/retrieval.py") == ["bot", "chat", "retriev", "py"]


def test_question_words_and_function_words_are_stopped(analyzer: Analyzer) -> None:
    assert analyzer.tokens("What did we say? Why does it happen? Tell me, did you try?") == []
    assert {"did", "does", "say", "try", "tell", "the", "what"} <= STOP_WORDS
    # words that name things in software are not stop words here (scikit-learn drops them)
    assert analyzer.tokens("empty system call") == ["empti", "system", "call"]


def test_non_ascii_text_is_analysed_like_ascii(analyzer: Analyzer) -> None:
    assert analyzer.tokens("Naïve café deploys #12 v1.2") == [
        "naïv",
        "café",
        "deploy",
        "#12",
        "v1.2",
    ]
    assert analyzer.tokens("deploys #12 v1.2") == analyzer.tokens("deploys #12 v1.2 é")[:3]


def test_closing_references_follow_githubs_keywords() -> None:
    text = "PR #80: Fixes #12, closes Acme/App#13, Resolved: #14; fix #12 again. Refs #15"
    assert closing_references(text, "acme/app") == (12, 13, 14)
    assert closing_references("prefix #15, fixing #16, see #17", "acme/app") == ()


def test_a_closing_reference_to_another_repository_closes_nothing_here() -> None:
    text = "Fixes other/lib#12 and closes #13; resolves acme/app#14"
    assert closing_references(text, "acme/app") == (13, 14)
