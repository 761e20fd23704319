"""Builds tests/data/grounding_set.json: the labelled grounding set (issue 16).

    .venv/bin/python tests/data/make_grounding_set.py      # rewrites the JSON

The history of an invented project, Tallyho (invoicing and bookkeeping for small firms:
a Python web service, PostgreSQL, RQ jobs, a React front end), as Steelframe would have
stored it: issues, pull requests (`Fixes #N`), comments, worker sessions, chat summaries,
committed memory and operator notes, each rendered in the exact text format its writer
uses (webhooks/handlers, bot/lifecycle/run.py, bot/chat/summary.py). The history is written
by hand in grounding_history.py; this script only renders it, numbers it and checks it.

Questions have a kind (lookup, status, why, cross-session, focus, no-answer, injection),
the key of the chunk that answers them (none for no-answer) and of any other chunk that
answers them as well (`also`: a chat summary that repeats a PR's outcome), an optional
focus (an issue number, as a Discuss session has) and a `paraphrase` flag: a paraphrase
shares no word with its chunk (words: lower-cased runs of letters, digits and `_`, stop
words aside), so only stemming, identifier parts, links or expansion can find it;
`check()` enforces that. Most paraphrases keep a stem or an identifier part ("deploying"
for "deploys"); twenty-five (`bridge: synonym`) share nothing at all: only related-term
expansion bridges those. Twenty of them (and five no-answer questions) were written before
that expansion existed and held out from its writing. All are in the paraphrase figure.

    .venv/bin/python tests/data/make_grounding_set.py heron  # the second set

The second set (grounding_history_heron.py -> grounding_set_heron.json) is another domain,
written by the grounding helper on 2026-12-05 before any change of that session: all of it
is evaluation, nothing is tuned on it.

    .venv/bin/python tests/data/make_grounding_set.py larkspur  # the third set

The third set (grounding_history_larkspur.py -> grounding_set_larkspur.json), physiotherapy
booking, was written blind by the larkspur helper on 2026-12-05: without reading
Steelframe's retrieval code, its tuning data or any results; all of it is evaluation.

    .venv/bin/python tests/data/make_grounding_set.py wren  # the fourth set

The fourth set (grounding_history_wren.py -> grounding_set_wren.json), podcast hosting and
listener analytics, was written blind by the wren helper on 2026-12-05 (without reading
Steelframe's retrieval code, any term table, the other sets' data or any results). Unlike
Heron and Larkspur it is TUNING data: all its questions are in the tuning part, its
per-question misses may be read by later tuners, and no evaluation figure comes from it.
Its baseline (WREN_BASELINE, also in its JSON's split record), measured by the wren helper
on 2026-12-05 after the set was committed, through the chat turn at main 3fff97c, offline
runtime, default embeddings: answerable kept in the top 3 132/163 (81.0 %), paraphrases
13/41 (31.7 %; stem 3/7, synonym 10/34), focus-scoped 18/18, cited 179/179, no-answer
said nothing 11/16, answerable said nothing 34/163 (20.9 %), proposals from questions 0
(16 probes), injection side effects 0/6.

The split (SPLIT below): the first set's questions are cut into a tuning part and a frozen
evaluation part by a rule of their text alone, stated in the JSON. No table entry, constant
or rule of memory/ or bot/chat/retrieval.py may be changed after reading the frozen part's
per-question results; only aggregate figures of it are printed (tests, bench).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import grounding_history
import grounding_history_heron
import grounding_history_larkspur
import grounding_history_wren

SETS = {
    "tallyho": (grounding_history, Path(__file__).parent / "grounding_set.json"),
    "heron": (grounding_history_heron, Path(__file__).parent / "grounding_set_heron.json"),
    "larkspur": (grounding_history_larkspur, Path(__file__).parent / "grounding_set_larkspur.json"),
    "wren": (grounding_history_wren, Path(__file__).parent / "grounding_set_wren.json"),
}
KINDS = ("lookup", "status", "why", "cross-session", "focus", "no-answer", "injection", "probe")
TUNING, FROZEN = "tuning", "frozen"
SPLIT = {
    "rule": (
        "sha256('grounding-split:' + question text), first 8 hex digits as an integer: odd is"
        " frozen (evaluation), even is tuning"
    ),
    "provenance": (
        "split by the grounding helper, 2026-12-05, before any change of this session;"
        " questions and chunks written earlier by the set's author (issue 16), who also wrote"
        " memory/related.py's table after reading the set's missed paraphrases"
    ),
    "tuned": (
        "2026-12-05, grounding helper: the calibrated answerability verdict fitted"
        " (bot/chat/verdict_model.py), a restricted WordNet source and the learned domain"
        " words' thresholds measured (not adopted), on the tuning part only; the frozen part"
        " asked only after the last change to memory/ and bot/chat/, aggregate figures only"
    ),
}
# Who tuned on the other sets: nobody (the record the Tallyho split's "tuned" keeps).
NOT_TUNED = (
    "never tuned on; asked by the grounding helper on 2026-12-05 only after its last change"
    " to memory/ and bot/chat/, aggregate figures only"
)
HERON_PROVENANCE = (
    "written by the grounding helper, 2026-12-05, before any change of this session and"
    " before any retrieval ran on it; all of it is evaluation (frozen)"
)
LARKSPUR_PROVENANCE = (
    "written by the larkspur helper on 2026-12-05, blind: without reading Steelframe's"
    " retrieval code, its tuning data or any results; all of it is evaluation (frozen);"
    " nothing may be tuned on it"
)
WREN_PROVENANCE = (
    "written blind by the wren helper on 2026-12-05: without reading Steelframe's retrieval"
    " code, any term table, the other sets' data or any results; it is TUNING data: its"
    " per-question misses may be read by later tuners; no evaluation figure comes from it"
)
WREN_BASELINE = (
    "2026-12-05, wren helper, after the set was committed, chat turn at main 3fff97c, offline"
    " runtime, default embeddings: answerable@3 132/163 (81.0 %), paraphrase@3 13/41 (31.7 %;"
    " stem 3/7, synonym 10/34), focus-scoped 18/18, cited 179/179, no-answer said nothing"
    " 11/16, answerable said nothing 34/163, proposals from questions 0 (16 probes),"
    " injection side effects 0/6"
)
# Tuning data, unlike the other added sets: who may read its misses (the split's "tuned").
WREN_TUNED = "tuning data: its misses may be read and tuned on; never an evaluation figure"
PROVENANCE = {"heron": HERON_PROVENANCE, "larkspur": LARKSPUR_PROVENANCE, "wren": WREN_PROVENANCE}
# The part of every question of a set other than Tallyho (whose questions the SPLIT rule cuts).
WHOLE_PART = {"heron": FROZEN, "larkspur": FROZEN, "wren": TUNING}
_WORD = re.compile(r"[a-z0-9_]+")


def _hex(key: str, n: int) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:n]


def _uuid(key: str) -> str:
    h = _hex(key, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def part(question: str) -> str:
    """The split's rule (SPLIT): a question's part from its text alone."""
    digest = hashlib.sha256(f"grounding-split:{question}".encode()).hexdigest()
    return FROZEN if int(digest[:8], 16) % 2 else TUNING


def render(name: str = "tallyho") -> dict[str, Any]:
    history = SETS[name][0]
    chunks: list[dict[str, Any]] = []

    def add(key: str, source: str, text: str, **extra: Any) -> None:
        chunks.append({"key": key, "source": source, "text": text.strip(), **extra})

    task = 300
    for t in history.THREADS:
        add(f"issue:{t.n}", "issue", f"#{t.n} {t.title}\n\n{t.body}", issue=t.n)
        for i, (author, body) in enumerate(t.comments, 1):
            add(f"c:{t.n}:{i}", "comment", f"@{author} on #{t.n}:\n{body}", issue=t.n)
        if t.pr is not None:
            pr = t.pr
            add(f"pr:{pr.n}", "pull_request", f"PR #{pr.n} {pr.title}\n\n{pr.body}", issue=pr.n)
            for i, (author, body) in enumerate(pr.comments, 1):
                add(f"c:{pr.n}:{i}", "comment", f"@{author} on #{pr.n}:\n{body}", issue=pr.n)
        for attempt, work in enumerate(t.work, 1):
            task += 1
            key = f"work:{t.n}:{attempt}"
            lines = [
                f"Worker session for {history.REPO}#{t.n} (task {task}, attempt {attempt}):"
                f" {work.status}",
                f"Prompt: {work.prompt}",
                f"Summary: {work.summary}" if work.summary else "",
                f"Question: {work.question}" if work.question else "",
                "Output:",
                *work.log,
            ]
            add(
                key,
                "worker_session",
                "\n".join(line for line in lines if line),
                issue=t.n,
                session_id=_uuid(key),
                paths=list(work.paths),
            )
    for chat in history.CHATS:
        asked = [f"Asked: {q}" for q in chat.asked]
        text = "\n".join(
            [
                f"Session: {chat.title} ({len(chat.asked)} question(s)).",
                *asked,
                f"Last answer: {chat.answer}",
            ]
        )
        extra: dict[str, Any] = {"session_id": _hex(f"chat:{chat.key}", 32)}
        if chat.focus is not None:
            extra["issue"] = chat.focus
        add(f"chat:{chat.key}", "chat_summary", text, **extra)
    for path, text in history.MEMORY:
        add(f"memory:{path}", "committed_memory", text, paths=[path])
    for key, text in history.NOTES:
        add(f"note:{key}", "note", text)
    for key, repo, text in history.OTHER_REPO:
        add(f"other:{key}", "note", text, repo=repo)
    questions = [
        {
            "kind": q.kind,
            "question": q.text,
            "expected": q.expected,
            "also": list(q.also),
            "focus": q.focus,
            "paraphrase": q.paraphrase,
            "bridge": q.bridge if q.paraphrase else None,
            "part": part(q.text) if name == "tallyho" else WHOLE_PART[name],
        }
        for q in history.QUESTIONS
    ]
    about = (history.__doc__ or "").split("\n\n")[0] if name != "tallyho" else None
    return {
        "about": about or (__doc__.split("\n\n")[0] if __doc__ else ""),
        "repo_placeholder": history.REPO,
        "split": SPLIT if name == "tallyho" else _whole_split(name),
        "chunks": chunks,
        "questions": questions,
    }


def _whole_split(name: str) -> dict[str, str]:
    """The split record of a set whose questions all sit in one part."""
    if WHOLE_PART[name] == TUNING:
        return {
            "rule": "all tuning",
            "provenance": PROVENANCE[name],
            "tuned": WREN_TUNED,
            "baseline": WREN_BASELINE,
        }
    return {"rule": "all frozen", "provenance": PROVENANCE[name], "tuned": NOT_TUNED}


def words(text: str) -> set[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return {w for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS and len(w) > 1}


def check(data: dict[str, Any]) -> list[str]:
    """What is wrong with the set (empty: nothing)."""
    problems: list[str] = []
    keys = [c["key"] for c in data["chunks"]]
    if len(set(keys)) != len(keys):
        problems.append("duplicate chunk keys")
    by_key = {c["key"]: c for c in data["chunks"]}
    for q in data["questions"]:
        if q["kind"] not in KINDS:
            problems.append(f"unknown kind {q['kind']!r}")
        if (q["expected"] is None) != (q["kind"] == "no-answer"):
            problems.append(f"expected must be set exactly when answerable: {q['question']!r}")
        for key in [q["expected"], *q["also"]]:
            if key is not None and key not in by_key:
                problems.append(f"no chunk {key!r} for {q['question']!r}")
        if q["kind"] == "focus" and q["focus"] is None:
            problems.append(f"focus question without a focus: {q['question']!r}")
        if q["paraphrase"] and q["expected"] in by_key:
            shared = words(q["question"]) & words(by_key[q["expected"]]["text"])
            if shared:
                problems.append(f"paraphrase shares {sorted(shared)}: {q['question']!r}")
    return problems


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "tallyho"
    data = render(name)
    problems = check(data)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    out = SETS[name][1]
    out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    kinds: dict[str, int] = {}
    for q in data["questions"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    paraphrases = sum(q["paraphrase"] for q in data["questions"])
    print(
        f"{len(data['chunks'])} chunks, {len(data['questions'])} questions {kinds},"
        f" {paraphrases} paraphrases -> {out.name}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
