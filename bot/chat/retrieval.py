"""Retrieve grounding for Chat turns (spec: Retrieve grounding), over `memory.search`.

Up to three rounds (docs/memory.md says what each asks and why): the message; the focus and
links (the focused issue's own text and the pull requests that close it come in as context,
not as floor-gated hits; a weak best hit's links are floor-gated hits); pseudo-relevance
feedback. Hits are kept at cosine >= CHAT_FLOOR and within RELATIVE_MARGIN of the round's
best, and labelled weak unless they match the whole question well (STRONG_SCORE). They are
ordered thread by thread (bot.chat.ordering) and injected as a `Prior Steelframe context:` block
of untrusted data; committed memory first; `(no semantic hits)` plus recent summaries when
nothing is kept; one widening when the draft cites nothing. A broken index or database makes
retrieval unavailable for the turn, never the turn fail.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from bot.background import BackgroundTasks
from bot.chat.blocks import HEADER, committed_block, context_block, fallback_block, untrusted
from bot.chat.grounding import (
    NO_SEMANTIC_HITS,
    Answerability,
    Emit,
    Grounding,
    Verdict,
)
from bot.chat.ordering import asks_state, ordered, rank, thread_key
from bot.chat.search_words import SearchWords
from bot.chat.summary import SessionSummary, SummarySink
from bot.chat.thread_focus import answering, latest_decision
from bot.config import AgentConfig
from bot.contracts.chat import StatusFrame
from bot.dialogue import NOTHING_ANSWERS
from memory import ChunkError, ChunkIn, ChunkSource, Hit, Memory, add_chunk, read_committed
from memory.answerability import Cover
from memory.committed import CommittedMemory, read_related
from memory.feedback import Expansion
from memory.segment import Record

log = logging.getLogger(__name__)

# The Chat floor (spec rule 2): a named constant, deliberately not a setting. A kept hit's
# cosine with its round's query is at least this. Calibrated on tests/data/grounding_set.json
# (tests/test_grounding_quality.py holds the numbers; docs/memory.md shows the distribution).
CHAT_FLOOR = 0.12
# ...and at least this share of the round's best score: a long tail of one-word matches
# under a good hit is noise, not context.
RELATIVE_MARGIN = 0.45
# A hit is "strong" when its cosine with the whole question (words the index has never seen
# included) reaches this; below it the hit is labelled weak in the prompt and the response.
# No question of the labelled set that memory cannot answer reaches it.
STRONG_SCORE = 0.3
ROUNDS = 3
FOCUS_THREAD_LIMIT = 500  # chunks of a focused thread read to find what a question asks for
# The answerability verdict (docs/memory.md, Answerability): memory answers the question when
# the top hits (and the focus context) hold at least this share of the question's idf
# weight (memory.answerability). Calibrated on the tuning part of the labelled set only
# (tests/test_grounding_quality.py); the frozen part and the second set are reported.
ANSWER_COVERAGE = 0.55
# ...or at least SUPPORTED_COVERAGE when the best hit's cosine with the whole question
# reaches SUPPORTED_BEST (on the tuning part: 0 of 20 no-answer questions said to be
# answered, 173 of 204 answerable ones; docs/memory.md has the table).
SUPPORTED_COVERAGE = 0.4
SUPPORTED_BEST = 0.25
# ...or when one thread holds this share of the model's search words (bot.chat.search_words).
# Not calibrated: the labelled sets are asked offline, with no model (docs/memory.md).
MODEL_WORDS_COVERAGE = 0.7
VERDICT_TOP = 3  # the semantic hits, in prompt order, the coverage is measured over
CHAT_K = 8  # semantic hits injected per turn at most (focus context comes on top)
CONTEXT_K = 3  # focus context: the issue's own text and up to two closing pull requests
THREAD_RECENT = 2  # ...and, in a Discuss session, its newest chunks if the question matches few
WIDEN_K = 12  # after a draft that cites nothing, up to this many
HIT_TEXT_CHARS = 1_200
RECENCY_LIMIT = 3
COMMITTED_BUDGET = 8_000
SYNC_ROWS_PER_TURN = 2_000  # a big backlog is caught up over several turns (or `reindex`)
TaskLookup = Callable[[AgentConfig, int], dict[str, Any] | None]
__all__ = ["CHAT_FLOOR", "HEADER", "MemoryGrounder", "chat_summary_sink", "untrusted"]


class RoundQuery(StrEnum):
    MESSAGE = "message"  # the operator's message, whole repository, focus lifted
    FOCUS = "focus"  # the focused issue's text and closing PRs (context), hits about them
    LINKS = "links"  # without a focus: the PRs closing the issues found, the issues closed
    EXPANSION = "expansion"  # pseudo-relevance feedback from the hits so far
    MODEL = "model"  # the question with the search words the model proposed
    WIDEN = "widen"  # after an uncited draft: feedback from every hit, no focus, more hits
    RECENCY = "recency"  # not retrieval: the newest summaries, when nothing is kept


class Strength(StrEnum):
    STRONG = "strong"
    WEAK = "weak"
    CONTEXT = "context"  # focus context: given, not found


# New hits each round may add (CHAT_K caps the total).
ROUND_K = {RoundQuery.MESSAGE: 6, RoundQuery.FOCUS: 3, RoundQuery.LINKS: 3}
EXPANSION_K = 3


@dataclass
class _Turn:
    """What the rounds of one turn have kept so far."""

    query: str
    agent: AgentConfig
    focus: int | None
    hits: dict[int, dict[str, Any]]
    rounds: list[dict[str, Any]]
    related: tuple[str, ...] = ()  # the repository's committed `related:` table
    words: tuple[str, ...] = ()  # search words the model proposed (bot.chat.search_words)

    @property
    def searched(self) -> str:
        """What rounds 2 and 3 search with: the question and the model's words."""
        return " ".join([self.query, *self.words])

    @property
    def semantic(self) -> list[dict[str, Any]]:
        return [h for h in self.hits.values() if h["strength"] != Strength.CONTEXT]


class MemoryGrounder:
    def __init__(
        self,
        memory: Memory,
        *,
        background: BackgroundTasks | None = None,
        tasks: TaskLookup | None = None,
        floor: float = CHAT_FLOOR,
        search_words: SearchWords | None = None,
    ) -> None:
        self.memory = memory
        self.search_words = search_words
        self.background = background
        self.tasks = tasks
        self.floor = floor
        self._merging: asyncio.Task[Any] | None = None

    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding:
        words = (
            asyncio.ensure_future(self.search_words(agent, query))
            if self.search_words is not None
            else None
        )
        try:
            prepared = await asyncio.to_thread(self._prepare, agent, focus)
            return await self._ground(query, agent, focus, emit, prepared, words)
        finally:
            if words is not None and not words.done():
                words.cancel()

    async def _ground(
        self,
        query: str,
        agent: AgentConfig,
        focus: int | None,
        emit: Emit,
        prepared: _Prepared,
        words: asyncio.Future[tuple[str, ...]] | None,
    ) -> Grounding:
        synced = prepared.synced
        base = self._base(prepared)
        try:
            if isinstance(synced, Exception):
                raise synced
            report, merge_due = synced
            if merge_due:
                self._merge_in_background()
            turn = _Turn(query, agent, focus, {}, [], prepared.related)
            await self._rounds(turn, emit, words)
        except Exception as exc:  # spec: retrieve errors never fail the turn
            reason = _reason(exc)
            log.warning("retrieval unavailable (agent %s): %s", agent.name, reason)
            await emit(StatusFrame(text="retrieve unavailable", reason=reason))
            return replace(
                base,
                available=False,
                prompt_block=f"{HEADER} (retrieval unavailable this turn)",
                meta={**base.meta, "retrieval": "unavailable", "reason": reason},
            )
        meta = {
            **base.meta,
            "rounds": turn.rounds,
            "index": {"added": report.added, "behind": report.behind},
        }
        hits = await self._ordered(turn)
        judged = await self._verdict(turn, hits, agent)
        meta["answerability"] = judged.to_json()
        if hits:
            return replace(
                base,
                hits=hits,
                prompt_block=context_block(hits, answers=judged.verdict is Verdict.ANSWERS),
                meta={**meta, "retrieval": "ok"},
                answerability=judged,
            )
        return await self._recency_fallback(base, meta, judged, prepared, emit)

    def _base(self, prepared: _Prepared) -> Grounding:
        """What every turn's grounding carries, whatever retrieval finds: committed memory,
        the focused task, the thresholds in force."""
        committed = prepared.committed
        return Grounding(
            committed_memory=[f.to_json() for f in committed.files],
            committed_block=committed_block(committed),
            task=prepared.task,
            meta={
                "floor": self.floor,
                "margin": RELATIVE_MARGIN,
                "strong": STRONG_SCORE,
                "committed": _committed_meta(committed),
            },
        )

    async def _recency_fallback(
        self,
        base: Grounding,
        meta: dict[str, Any],
        judged: Answerability,
        prepared: _Prepared,
        emit: Emit,
    ) -> Grounding:
        """No semantic hit: the most recent summaries instead, said so in the status line."""
        recent = _recent(prepared.recent)
        await emit(
            StatusFrame(
                text=f"{NO_SEMANTIC_HITS} · "
                + _count(len(recent), "recent summary", "recent summaries")
            )
        )
        return replace(
            base,
            hits=recent,
            recency_fallback=True,
            prompt_block=fallback_block(recent),
            meta={**meta, "retrieval": "recency fallback"},
            answerability=judged,
        )

    async def _verdict(
        self, turn: _Turn, hits: list[dict[str, Any]], agent: AgentConfig
    ) -> Answerability:
        try:
            return await asyncio.to_thread(self._judge, turn, hits)
        except Exception as exc:  # the verdict, like retrieval, never fails the turn
            log.warning("answerability unavailable (agent %s): %s", agent.name, _reason(exc))
            return Answerability(Verdict.UNAVAILABLE, _reason(exc))

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding:
        started = time.perf_counter()
        turn = _Turn(query, agent, None, {h["id"]: h for h in previous.kept_hits}, [])
        feedback = [_record(h) for h in previous.kept_hits]
        found, added_terms = await asyncio.to_thread(
            self._feedback, turn, feedback, WIDEN_K + len(turn.hits)
        )
        room = max(0, WIDEN_K - len(turn.hits))
        added = await self._keep(
            turn, _select(_new(found, turn), room, self.floor), RoundQuery.WIDEN
        )
        await emit(
            StatusFrame(
                text=f"retrieve widen · {_count(len(added), 'new hit', 'new hits')}",
                query=RoundQuery.WIDEN.value,
                hits=len(added),
            )
        )
        hits = await self._ordered(turn)
        widened = {
            "query": RoundQuery.WIDEN.value,
            "hits": len(added),
            "added_terms": list(added_terms),
            "ms": _ms(started),
        }
        return replace(
            previous,
            hits=hits,
            prompt_block=context_block(hits, answers=previous.verdict is not Verdict.NOTHING),
            meta={**previous.meta, "rounds": [*previous.meta.get("rounds", []), widened]},
        )

    def cites(self, reply: str, grounding: Grounding) -> bool:
        """Does the reply cite a kept hit: its #issue (or a #PR it closes), its session id
        (or its first 8 characters), or one of its rare terms (memory.feedback.rare_terms)?"""
        hits = grounding.kept_hits
        if not hits:
            return False
        if grounding.verdict is Verdict.NOTHING and reply.lstrip().startswith(NOTHING_ANSWERS):
            return True  # it says memory has no answer: nothing of the closest needs citing
        said = self.memory.terms(reply)
        for hit in hits:
            numbers = [hit.get("issue"), *(hit.get("links") or [])]
            if any(n and re.search(rf"#{int(n)}(?!\d)", reply) for n in numbers):
                return True
            session = hit.get("session_id")
            if session and (session in reply or (len(session) >= 8 and session[:8] in reply)):
                return True
            if said.intersection(hit.get("distinctive", [])):
                return True
        return False

    # -- the verdict -----------------------------------------------------------------------

    def _judge(self, turn: _Turn, hits: list[dict[str, Any]]) -> Answerability:
        """Does memory answer the question? (docs/memory.md, Answerability.) The evidence:
        the share of the question's distinctive vocabulary the top hits and the focus
        context contain (memory.answerability), the best hit's cosine with the question,
        the margin of the best thread over the next, whether later rounds found more of
        the best thread, and whether the best hit's source is what the question asks for."""
        semantic = [h for h in hits if h["strength"] != Strength.CONTEXT]
        if not hits:
            return Answerability(Verdict.NOTHING, "no hit")
        context = [h for h in hits if h["strength"] == Strength.CONTEXT]
        shown = [*semantic[:VERDICT_TOP], *context]
        union = self._coverage(turn, shown)
        # ...and by thread: an answer is one thread that holds the question, not three
        # threads that each hold a word of it
        by_thread: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for hit in shown:
            by_thread.setdefault(thread_key(hit), []).append(hit)
        covers = [self._coverage(turn, group) for group in by_thread.values()]
        covered = max(covers, key=lambda c: c.coverage)
        # The model's words (it saw the question, not memory) held by one thread: evidence
        # the thread answers in other words than the question's.
        by_words = self._model_words_coverage(turn, by_thread)
        best = max((float(h.get("question_score") or 0.0) for h in semantic), default=0.0)
        lead = semantic[0] if semantic else hits[0]
        margin, agreement = _margin_and_agreement(semantic, lead)
        # In a Discuss session a question in words memory knows ("is it done?", "what did
        # we decide here?") is about the focused thread, which is given: it answers.
        about_focus = turn.focus is not None and bool(context) and not union.unknown
        answers = (
            covered.coverage >= ANSWER_COVERAGE
            or (covered.coverage >= SUPPORTED_COVERAGE and best >= SUPPORTED_BEST)
            or about_focus
            or by_words >= MODEL_WORDS_COVERAGE
        )
        if about_focus:
            reason = f"a question about the focused issue #{turn.focus} in words memory knows"
        elif by_words >= MODEL_WORDS_COVERAGE and covered.coverage < SUPPORTED_COVERAGE:
            reason = f"one thread holds {by_words:.0%} of the model's search words"
        else:
            reason = (
                f"one thread of the top hits holds {covered.coverage:.0%} of the question's"
                f" distinctive words, the best hit's cosine is {best:.2f}"
                + ("" if answers else f" (missing: {', '.join(covered.missing[:4])})")
            )
        return Answerability(
            Verdict.ANSWERS if answers else Verdict.NOTHING,
            reason,
            coverage=covered.coverage,
            spread=union.coverage,
            model_words=round(by_words, 4),
            best=round(best, 4),
            margin=round(margin, 3),
            agreement=agreement,
            fits=_fits(turn.query, str(lead["source"])),
            missing=covered.missing[:8],
        )

    def _model_words_coverage(
        self, turn: _Turn, by_thread: dict[tuple[str, int], list[dict[str, Any]]]
    ) -> float:
        """The most of the model's search words one thread holds (0 when it proposed none)."""
        said = " ".join(turn.words)
        if not said:
            return 0.0
        return max(
            (
                self.memory.coverage(said, [_record(h) for h in g]).coverage
                for g in by_thread.values()
            ),
            default=0.0,
        )

    def _coverage(self, turn: _Turn, hits: list[dict[str, Any]]) -> Cover:
        return self.memory.coverage(
            turn.query, [_record(h) for h in hits], repo=turn.agent.repo, related=turn.related
        )

    # -- rounds --------------------------------------------------------------------------

    async def _rounds(
        self, turn: _Turn, emit: Emit, words: asyncio.Future[tuple[str, ...]] | None = None
    ) -> None:
        await self._round(turn, RoundQuery.MESSAGE, emit, self._message_round)
        if words is not None:
            turn.words = await words  # asked while round 1 ran; () when the model said nothing
        if turn.focus is not None:
            await self._round(turn, RoundQuery.FOCUS, emit, self._focus_round)
        elif turn.semantic:
            await self._round(turn, RoundQuery.LINKS, emit, self._links_round)
        if turn.words and len(turn.semantic) < CHAT_K:
            await self._round(turn, RoundQuery.MODEL, emit, self._model_round)
        elif _strong(turn) and len(turn.semantic) < CHAT_K:
            await self._round(turn, RoundQuery.EXPANSION, emit, self._expansion_round)

    async def _round(self, turn: _Turn, kind: RoundQuery, emit: Emit, run: Any) -> None:
        started = time.perf_counter()
        added, detail = await run(turn)
        number = len(turn.rounds) + 1
        hits = sum(1 for h in added if h["strength"] != Strength.CONTEXT)
        context = len(added) - hits
        entry = {
            "round": number,
            "query": kind.value,
            "hits": hits,
            "context": context,
            "ids": [h["id"] for h in added],
            **detail,
            "ms": _ms(started),
        }
        turn.rounds.append(entry)
        text = f"retrieve {number}/{ROUNDS} · {_count(hits, 'hit', 'hits')}"
        if context:
            text += f" + {context} focus context"
        if detail.get("model_words"):
            text += f" · model words: {' '.join(detail['model_words'])}"
        if detail.get("added_terms"):
            text += f" · expanded with {len(detail['added_terms'])} terms"
        await emit(
            StatusFrame(
                text=text,
                round=number,
                rounds=ROUNDS,
                query=kind.value,
                hits=hits,
                context=context,
            )
        )

    async def _message_round(self, turn: _Turn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The question and its related terms (memory.related: "bill" asks for "invoice"
        too, at a fraction of the weight), so a question in other words finds its chunk."""
        room = ROUND_K[RoundQuery.MESSAGE]
        found, grown = await asyncio.to_thread(
            self.memory.related_search,
            turn.query,
            repo=turn.agent.repo,
            focus=turn.focus,
            k=room,
            floor=self.floor,
            related=turn.related,
        )
        chosen = _select(found, room, self.floor)
        added = await self._keep(turn, chosen, RoundQuery.MESSAGE, grown=grown)
        return added, {"related_terms": list(grown.added)}

    async def _focus_round(self, turn: _Turn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The focused issue's own text and the PRs that close it come in as context (not
        floor-gated); then the chunks of its thread that match the question."""
        assert turn.focus is not None
        added, detail = await self._thread(turn, [turn.focus], recent=THREAD_RECENT)
        return added, {"focus": turn.focus, **detail}

    async def _links_round(self, turn: _Turn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Without a focus, the best hit plays its part: its issue and the PRs that close it
        (`Fixes #N`, both ways) come in, and its thread's chunks that match the question are
        kept at the floor like any hit. A strong anchor's issue and PRs are context (given);
        a weak anchor's are only found: floor-gated and weak, without the newest chunks."""
        strong = _strong(turn)
        anchor = strong[0] if strong else max(turn.semantic, key=rank)
        if anchor["source"] == ChunkSource.PULL_REQUEST.value and anchor.get("links"):
            issues = list(anchor["links"])
        elif anchor.get("issue"):
            issues = [anchor["issue"]]
        else:
            return [], {"followed": []}
        if strong:
            return await self._thread(turn, issues, recent=THREAD_RECENT)
        return await self._thread(turn, issues, recent=0, as_context=False)

    async def _thread(
        self,
        turn: _Turn,
        issues: list[int],
        *,
        recent: int,
        as_context: bool = True,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        repo = turn.agent.repo
        about = await asyncio.to_thread(self.memory.about, issues, repo=repo)
        own = [r for r in about if r.source == ChunkSource.ISSUE.value][-len(issues) :]
        closing = await asyncio.to_thread(self.memory.linking, issues, repo=repo)
        closing = closing[-max(1, CONTEXT_K - len(own)) :]
        pulls = {r.issue for r in closing if r.issue is not None}
        asked: list[Record] = []
        if as_context and turn.focus is not None:
            asked = await self._asked_in_focus(turn, {*issues, *pulls}, own)
        given = {r.id: r for r in [*asked, *own, *closing] if r.id not in turn.hits}
        room = ROUND_K[RoundQuery.FOCUS]  # its own share, even when round 1 is full
        found = await asyncio.to_thread(
            self.memory.search,
            turn.searched,
            repo=repo,
            k=room + len(turn.hits) + len(given),
            floor=self.floor,
            within={*issues, *pulls},
        )
        fresh = [h for h in _new(found, turn) if h.chunk_id not in given]
        matched = _select(fresh, room, self.floor, margin=0.0)
        if recent and len(matched) < recent:  # a short question in a Discuss session
            taken = {h.chunk_id for h in matched} | set(given) | set(turn.hits)
            # the newest chunks of the thread: the issue's comments and its PRs' comments
            rest = await asyncio.to_thread(self.memory.about, {*issues, *pulls}, repo=repo)
            rest = [r for r in rest if r.id not in taken and r.source != ChunkSource.ISSUE.value]
            given.update((r.id, r) for r in rest[-(recent - len(matched)) :])
        records = list(given.values())
        scored = await asyncio.to_thread(self.memory.cosines, turn.query, records)
        kind = RoundQuery.FOCUS if turn.focus is not None else RoundQuery.LINKS
        pairs = list(zip(records, scored.scores, strict=True))
        if not as_context:
            # Found, not given: at the floor like any hit; but a question about the state of
            # something asks what was done, so the PR closing the issue comes in regardless.
            done = asks_state(turn.query)
            pairs = [
                (r, s)
                for r, s in pairs
                if s >= self.floor or (done and r.source == ChunkSource.PULL_REQUEST.value)
            ]
        added = await self._keep(
            turn,
            [Hit(r, s, scored.coverage) for r, s in pairs],
            kind,
            strength=Strength.CONTEXT if as_context else None,
        )
        added += await self._keep(turn, matched, kind)
        return added, {"followed": sorted(issues), "closing_prs": sorted(pulls)}

    async def _asked_in_focus(
        self, turn: _Turn, thread_issues: set[int], own: list[Record]
    ) -> list[Record]:
        """Focus ranks within the thread (bot.chat.thread_focus): what the question asks for
        comes first, and the latest Decision is always in view."""
        thread = await asyncio.to_thread(
            self.memory.about, thread_issues, repo=turn.agent.repo, limit=FOCUS_THREAD_LIMIT
        )
        asked = answering(turn.query, thread)
        decision = latest_decision(thread)
        asked += [decision] if decision is not None and decision not in asked else []
        for record in [*asked, *own]:  # found by round 1 already: given now, in place
            turn.hits.pop(record.id, None)
        return asked

    async def _model_round(self, turn: _Turn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The question with the model's search words (related terms too): a paraphrase is
        bridged by the model's vocabulary. Its hits are weighed against each other."""
        room = min(ROUND_K[RoundQuery.MESSAGE], CHAT_K - len(turn.semantic))
        found, _ = await asyncio.to_thread(
            self.memory.related_search,
            turn.searched,
            repo=turn.agent.repo,
            focus=turn.focus,
            k=room + len(turn.hits),
            floor=self.floor,
            related=turn.related,
        )
        added = await self._keep(
            turn, _select(_new(found, turn), room, self.floor), RoundQuery.MODEL
        )
        return added, {"model_words": list(turn.words)}

    async def _expansion_round(self, turn: _Turn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Rocchio feedback from the strong hits: the question plus their mid-frequency
        terms. Its new hits are weighed against each other (the feedback chunks themselves
        always match an expansion of their own terms best)."""
        feedback = [_record(h) for h in _strong(turn)]
        room = min(EXPANSION_K, CHAT_K - len(turn.semantic))
        found, added_terms = await asyncio.to_thread(
            self._feedback, turn, feedback, room + len(turn.hits)
        )
        if not added_terms:  # nothing to ask that round 1 did not
            return [], {"added_terms": []}
        chosen = _select(_new(found, turn), room, self.floor)
        added = await self._keep(turn, chosen, RoundQuery.EXPANSION)
        return added, {"added_terms": list(added_terms)}

    async def _ordered(self, turn: _Turn) -> list[dict[str, Any]]:
        """The kept hits in prompt order (bot.chat.ordering), each with its `thread`: a
        comment on a pull request belongs to the thread of the issue the PR closes."""
        hits = list(turn.hits.values())
        numbers = {int(h["issue"]) for h in hits if h.get("issue")}
        closes = (
            await asyncio.to_thread(self.memory.closes, numbers, repo=turn.agent.repo)
            if numbers
            else {}
        )
        for hit in hits:
            number = hit.get("issue")
            if number:
                hit["thread"] = min(closes.get(int(number)) or hit.get("links") or [number])
        return ordered(hits, state=asks_state(turn.query))

    def _feedback(
        self, turn: _Turn, feedback: list[Record], k: int
    ) -> tuple[list[Hit], tuple[str, ...]]:
        hits, grown = self.memory.feedback_search(
            turn.query, feedback, repo=turn.agent.repo, focus=turn.focus, k=k, floor=self.floor
        )
        return hits, grown.added

    async def _keep(
        self,
        turn: _Turn,
        hits: list[Hit],
        kind: RoundQuery,
        *,
        strength: Strength | None = None,
        grown: Expansion | None = None,
    ) -> list[dict[str, Any]]:
        """Record `hits` as kept by `kind`. Strength always from the cosine with the question
        itself (words the index never saw included): related or expansion terms find a
        chunk, they never make it strong. `matched` (the ordering's coordination) is the
        share of the query the round searched with (`grown`) that the hit contains."""
        if not hits:
            return []
        records = [h.record for h in hits]
        scored = await asyncio.to_thread(self.memory.cosines, turn.query, records)
        whole = [s * scored.coverage for s in scored.scores]
        coordination = scored.coordination
        if grown is not None and grown.added:
            coordination = (
                await asyncio.to_thread(self.memory.cosines, grown, records)
            ).coordination
        added = await asyncio.to_thread(self._hits, turn.query, hits, kind)
        for hit, score in zip(added, whole, strict=True):
            hit["strength"] = (
                strength or (Strength.STRONG if score >= STRONG_SCORE else Strength.WEAK)
            ).value
            hit["question_score"] = round(score, 4)
            turn.hits[hit["id"]] = hit
        for hit, matched in zip(added, coordination, strict=True):
            hit["matched"] = round(matched, 4)
        return added

    def _hits(self, query: str, hits: list[Hit], kind: RoundQuery) -> list[dict[str, Any]]:
        return [
            {
                **hit.to_json(text_limit=HIT_TEXT_CHARS),
                "round": kind.value,
                "distinctive": self.memory.distinctive(hit.record.text, exclude=query),
            }
            for hit in hits
        ]

    def _prepare(self, agent: AgentConfig, focus: int | None) -> _Prepared:
        """What a turn reads before it searches, in one thread hop: each hop costs the loop
        a submit and a wake-up, and 1,000 turns starting within a second paid four each.
        The recency fallback is read here too, after the index caught up: it is cached per
        index generation, so asking for it when hits make it unneeded costs a lookup. The
        catch-up and the recency read may fail (the turn goes on without them); the
        committed files and the task never do."""
        committed, task = _committed(agent), self._task(agent, focus)
        related = _related_table(agent)
        synced: tuple[Any, bool] | Exception
        try:
            synced = self._sync()
        except Exception as exc:
            synced = exc
        recent: list[Hit] | Exception
        try:
            recent = self.memory.recent(repo=agent.repo, limit=RECENCY_LIMIT)
        except Exception as exc:
            recent = exc
        return _Prepared(committed, task, synced, recent, related)

    def _sync(self) -> tuple[Any, bool]:
        report = self.memory.sync(limit=SYNC_ROWS_PER_TURN)
        return report, self.memory.merge_due()

    def _merge_in_background(self) -> None:
        if self.background is None or (self._merging is not None and not self._merging.done()):
            return
        self._merging = self.background.spawn(
            asyncio.to_thread(self.memory.merge), name="memory-merge"
        )

    def _task(self, agent: AgentConfig, focus: int | None) -> dict[str, Any] | None:
        if self.tasks is None or focus is None:
            return None
        try:
            return self.tasks(agent, focus)
        except Exception as exc:
            log.warning("task lookup for #%s failed: %s", focus, _reason(exc))
            return None


# -- selection -------------------------------------------------------------------------


def _select(
    hits: Iterable[Hit],
    room: int,
    floor: float,
    *,
    margin: float = RELATIVE_MARGIN,
    best: float | None = None,
) -> list[Hit]:
    """Hits at or above the floor and within `margin` of the best score, at most `room`."""
    ranked = list(hits)
    if room <= 0 or not ranked:
        return []
    top = best if best is not None else max(h.score for h in ranked)
    bar = max(floor, margin * top)
    return [h for h in ranked if h.score >= bar][:room]


# What a question's kind asks for, by its words: the source that answers it.
_KIND_SOURCES = (
    (re.compile(r"\b(?:worker|attempt|tried|try|session|agent)\b", re.I), {"worker_session"}),
    (re.compile(r"\b(?:fix|fixed|pr|pull|merged|change[sd]?)\b", re.I), {"pull_request"}),
    (re.compile(r"\b(?:decide[sd]?|decision|agree[sd]?|chose|choose)\b", re.I), {"comment"}),
    (re.compile(r"\b(?:why|how come|reason)\b", re.I), {"comment", "issue"}),
)


def _fits(question: str, source: str) -> bool:
    """Is `source` what the question's kind asks for? (A question of no kind: any fits.)"""
    wanted = [sources for pattern, sources in _KIND_SOURCES if pattern.search(question)]
    return not wanted or any(source in sources for sources in wanted)


def _strong(turn: _Turn) -> list[dict[str, Any]]:
    """The turn's strong hits, best first."""
    return sorted(
        (h for h in turn.semantic if h["strength"] == Strength.STRONG), key=lambda h: -h["score"]
    )


def _new(hits: list[Hit], turn: _Turn) -> list[Hit]:
    return [h for h in hits if h.chunk_id not in turn.hits]


def _record(hit: dict[str, Any]) -> Record:
    return Record(
        id=int(hit["id"]),
        source=str(hit["source"]),
        repo=str(hit.get("repo") or ""),
        text=str(hit.get("text") or ""),
        issue=hit.get("issue"),
        paths=tuple(hit.get("paths") or ()),
    )


# -- committed memory, helpers -----------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    committed: CommittedMemory
    task: dict[str, Any] | None
    synced: tuple[Any, bool] | Exception  # the index's catch-up report and merge_due
    recent: list[Hit] | Exception  # the newest summaries: the recency fallback
    related: tuple[str, ...] = ()  # the committed `related:` table (memory.committed)


def _recent(prepared: list[Hit] | Exception) -> list[dict[str, Any]]:
    if isinstance(prepared, Exception):
        log.warning("recent summaries unavailable: %s", _reason(prepared))
        return []
    return [
        {
            **hit.to_json(text_limit=HIT_TEXT_CHARS),
            "score": None,
            "round": RoundQuery.RECENCY.value,
        }
        for hit in prepared
    ]


def _committed(agent: AgentConfig) -> CommittedMemory:
    try:
        return read_committed(agent.checkout, budget=COMMITTED_BUDGET)
    except OSError as exc:
        log.warning("committed memory unreadable for agent %s: %s", agent.name, _reason(exc))
        return CommittedMemory()


def _related_table(agent: AgentConfig) -> tuple[str, ...]:
    try:
        return read_related(agent.checkout)
    except OSError as exc:  # read_related reports what it can; this is the rest
        log.warning("related table unreadable for agent %s: %s", agent.name, _reason(exc))
        return ()


def _committed_meta(committed: CommittedMemory) -> dict[str, Any]:
    return {
        "files": [f.path for f in committed.files],
        "truncated": [f.path for f in committed.files if f.truncated],
        "omitted": committed.omitted,
        "skipped": committed.skipped,
    }


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _reason(exc: Exception) -> str:
    """The error's class and first line (no tracebacks or payloads in metadata and logs)."""
    text = str(getattr(exc, "message", None) or exc)
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:200] if first else type(exc).__name__


# -- the chat summary sink -------------------------------------------------------------


def chat_summary_sink(agents: Mapping[str, AgentConfig]) -> SummarySink:
    """Store each closed chat session's summary as a `chat_summary` chunk (same transaction
    as the summary; the key makes a re-run replace rather than duplicate it)."""

    def sink(session: Session, summary: SessionSummary) -> None:
        agent = agents.get(summary.agent)
        if agent is None:
            log.warning(
                "summary of session %s: agent %s is gone", summary.session_id, summary.agent
            )
            return
        chunk = ChunkIn(
            text=summary.text,
            source=ChunkSource.CHAT_SUMMARY,
            repo=agent.repo,
            issue=summary.focus,
            session_id=summary.session_id,
            key=f"chat_summary:{summary.session_id}",
        )
        try:
            add_chunk(session, chunk)
        except ChunkError as exc:
            log.warning(
                "summary of session %s not stored in memory: %s", summary.session_id, exc.message
            )

    return sink


def _margin_and_agreement(
    semantic: list[dict[str, Any]], lead: dict[str, Any]
) -> tuple[float, bool]:
    """Evidence recorded beside the verdict (not used by it): how far the best thread leads
    the next, and whether a later round found more of the leading thread."""
    threads: dict[tuple[str, int], float] = {}
    for hit in semantic:
        key = thread_key(hit)
        threads[key] = max(threads.get(key, 0.0), rank(hit))
    ranks = sorted(threads.values(), reverse=True)
    margin = ranks[0] / ranks[1] if len(ranks) > 1 and ranks[1] > 0 else float(bool(ranks))
    agreement = any(
        h["round"] != RoundQuery.MESSAGE.value and thread_key(h) == thread_key(lead)
        for h in semantic[1:]
    )
    return margin, agreement
