"""bot.chat.answer_kind: the kind of answer a question asks for, and whether a text holds a
value of it (crafted sentences, not the labelled sets)."""

from __future__ import annotations

import pytest

from bot.chat.answer_kind import Kind, asked_kind, holds, kind_missing


@pytest.mark.parametrize(
    ("question", "kind", "counted"),
    [
        ("How many crates can a free account keep?", Kind.COUNT, ("crates",)),
        ("How many blue widgets were returned?", Kind.COUNT, ("blue", "widgets")),
        ("how many were affected?", Kind.COUNT, ()),
        ("How much do we charge per seat?", Kind.QUANTITY, ()),
        ("How long are the download links valid?", Kind.QUANTITY, ()),
        ("What is the maximum file size?", Kind.QUANTITY, ()),
        ("What share of refunds is automatic?", Kind.SHARE, ()),
        ("What percentage of builds fail?", Kind.SHARE, ()),
        ("When did we switch the mail provider?", Kind.DATE, ()),
        ("What date is the audit?", Kind.DATE, ()),
        ("What date goes into the signature field?", None, ()),
        ("Which amount do reminders show?", None, ()),
        ("Which Postgres version do we run?", Kind.VERSION, ()),
        ("Who rejects the export when the total is off?", None, ()),
        ("When does a report fall back to the primary?", None, ()),
        ("Why did we drop the old parser?", None, ()),
        ("Which queue handles retries?", None, ()),
    ],
)
def test_the_kind_a_question_asks_for(
    question: str, kind: Kind | None, counted: tuple[str, ...]
) -> None:
    assert asked_kind(question) == (kind, counted)


def test_a_count_stands_next_to_the_thing_counted() -> None:
    question = "How many crates can a free account keep?"
    assert kind_missing(question, ["Free accounts keep 3 crates; paid ones keep 40."]) == ""
    assert kind_missing(question, ["Crates: 12 on the free plan."]) == ""
    assert kind_missing(question, ["Reported by three crates owners, two of them free."]) == ""
    assert kind_missing(question, ["Crates move at renewal; about 40 of 300 are free."]) == ""
    # every word of the question, and numbers, but no number of crates
    assert (
        kind_missing(question, ["Free accounts keep crates; storage is 60 per crate, see #412."])
        == "count"
    )
    assert kind_missing(question, ["Free accounts keep crates until they upgrade."]) == "count"


def test_a_value_the_question_holds_is_not_its_answer() -> None:
    question = "How many orders did Acme place in 2025?"
    assert kind_missing(question, ["Acme placed orders all through 2025 orders."]) == "count"
    assert kind_missing(question, ["In 2025 Acme placed 212 orders."]) == ""
    assert kind_missing("What date did 2025 start?", ["It was 2025."]) == "date"


def test_identifiers_are_not_quantities() -> None:
    question = "How long are the signed links valid?"
    assert kind_missing(question, ["Signed links live in R2, see #131 and @dev9."]) == "quantity"
    assert kind_missing(question, ["Signed links are valid for 15 minutes."]) == ""
    assert kind_missing(question, ["Signed links expire after an hour."]) == ""
    assert kind_missing(question, ["Signed links now expire after 900s."]) == ""


@pytest.mark.parametrize(
    ("kind", "text", "held"),
    [
        (Kind.SHARE, "The processor keeps 30% of the revenue.", True),
        (Kind.SHARE, "About 1 in 4 refunds is matched by hand.", True),
        (Kind.SHARE, "Half of the builds fail on Mondays.", True),
        (Kind.SHARE, "The processor keeps a fee on each of 30 payments.", False),
        (Kind.DATE, "We switched on 12 March.", True),
        (Kind.DATE, "Shipped 2024-11-02 with the new parser.", True),
        (Kind.DATE, "We switched after the outage, in PR #88.", False),
        (Kind.DATE, "We may switch after the outage.", False),
        (Kind.DATE, "We switched on May 3.", True),
        (Kind.VERSION, "Production runs Postgres 16.4 since the upgrade.", True),
        (Kind.VERSION, "The v3 client drops callbacks.", True),
        (Kind.VERSION, "Production runs Postgres on 4 nodes (#77).", False),
        (Kind.QUANTITY, "Each seat costs $12 a month.", True),
        (Kind.QUANTITY, "Seats are billed monthly.", True),
        (Kind.QUANTITY, "A restore drill every quarter.", True),
        (Kind.QUANTITY, "Seats are billed by the processor.", False),
    ],
)
def test_values_of_each_kind(kind: Kind, text: str, held: bool) -> None:
    assert holds(kind, (), text) is held


def test_no_kind_asked_is_never_missing() -> None:
    assert kind_missing("Why did we drop the old parser?", []) == ""
    assert kind_missing("How many crates can a free account keep?", []) == "count"
