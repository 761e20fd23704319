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

Its parts: the numbers, rounds and a turn's kept hits (bot.chat.retrieval_hits), what a turn
reads before it searches (bot.chat.committed_context), the verdict (bot.chat.answerability),
the citation check (bot.chat.citation), the optional dense round (bot.chat.hybrid).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial

import msgspec
import numpy as np
from numpy.typing import NDArray

from bot.background import BackgroundTasks
from bot.chat.answerability import judge
from bot.chat.blocks import HEADER, context_block
from bot.chat.citation import cites
from bot.chat.committed_context import (
    Prepared,
    TaskLookup,
    TurnPreparation,
    base_grounding,
    recency_fallback,
)
from bot.chat.grounding import Answerability, Grounding, Verdict
from bot.chat.hybrid import HybridRanking
from bot.chat.ordering import asks_state, ordered, rank
from bot.chat.retrieval_hits import (
    CHAT_FLOOR,
    CHAT_K,
    CONTEXT_K,
    EXPANSION_K,
    FOCUS_THREAD_LIMIT,
    ROUND_K,
    ROUNDS,
    STRONG_SCORE,
    THREAD_RECENT,
    WIDEN_K,
    RetrievalTurn,
    RetrievedHit,
    RoundQuery,
    Strength,
    count_of,
    elapsed_ms,
    new_hits,
    reason_of,
    record_of,
    retrieved,
    select_hits,
    strong_hits,
)
from bot.chat.search_words import SearchWords
from bot.chat.thread_focus import answering, latest_decision
from bot.config import AgentConfig
from bot.contracts.chat import Emit, StatusFrame, StatusReason
from bot.contracts.turn_meta import RetrievalMeta, RoundMeta
from memory import ChunkSource, Hit, Memory
from memory.errors import IndexCorrupt
from memory.feedback import Expansion
from memory.segment import Record

log = logging.getLogger(__name__)
# A round: the hits it kept and what it says about itself in the turn's metadata.
Round = Callable[[RetrievalTurn], Awaitable[tuple[list[RetrievedHit], RoundMeta]]]
Asked = asyncio.Future[NDArray[np.float32]]  # the question's embedding, asked at turn start


class MemoryGrounder:
    def __init__(
        self,
        memory: Memory,
        *,
        background: BackgroundTasks | None = None,
        tasks: TaskLookup | None = None,
        floor: float = CHAT_FLOOR,
        search_words: SearchWords | None = None,
        hybrid: HybridRanking | None = None,
    ) -> None:
        self.memory = memory
        self.search_words = search_words
        self.hybrid = hybrid  # the dense round (bot.chat.hybrid), when embeddings are on
        self.total = ROUNDS + (hybrid is not None)
        self.floor = floor
        self.preparation = TurnPreparation(memory, background=background, tasks=tasks)

    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding:
        words = (
            asyncio.ensure_future(self.search_words(agent, query))
            if self.search_words is not None
            else None
        )
        asked = self.hybrid.ask(query) if self.hybrid is not None else None
        try:
            prepared = await asyncio.to_thread(self.preparation.prepare, agent, focus)
            return await self._ground(query, agent, focus, emit, prepared, (words, asked))
        finally:
            for pending in (words, asked):
                if pending is not None and not pending.cancel() and not pending.cancelled():
                    pending.exception()  # retrieved: a failure the rounds never read is no error

    async def _ground(
        self,
        query: str,
        agent: AgentConfig,
        focus: int | None,
        emit: Emit,
        prepared: Prepared,
        pending: tuple[asyncio.Future[tuple[str, ...]] | None, Asked | None],
    ) -> Grounding:
        synced = prepared.synced
        base = base_grounding(prepared, self.floor)
        try:
            if isinstance(synced, Exception):
                raise synced
            report, merge_due = synced
            if merge_due:
                self.preparation.merge_in_background()
            turn = RetrievalTurn(query, agent, focus, {}, [], prepared.related)
            await self._rounds(turn, emit, *pending)
        except Exception as exc:  # spec: retrieve errors never fail the turn
            if isinstance(exc, IndexCorrupt):
                self.preparation.repair_in_background()
            reason = reason_of(exc)
            log.warning("retrieval unavailable (agent %s): %s", agent.name, reason)
            await emit(
                StatusFrame(
                    text="retrieve unavailable",
                    reason=StatusReason.RETRIEVE_UNAVAILABLE,
                    detail=reason,
                )
            )
            return replace(
                base,
                available=False,
                prompt_block=f"{HEADER} (retrieval unavailable this turn)",
                meta={**base.meta, "retrieval": "unavailable", "reason": reason},
            )
        meta: RetrievalMeta = {
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
        return await recency_fallback(base, meta, judged, prepared, emit)

    async def _verdict(
        self, turn: RetrievalTurn, hits: list[RetrievedHit], agent: AgentConfig
    ) -> Answerability:
        try:
            return await asyncio.to_thread(judge, self.memory, turn, hits)
        except Exception as exc:  # the verdict, like retrieval, never fails the turn
            log.warning("answerability unavailable (agent %s): %s", agent.name, reason_of(exc))
            return Answerability(Verdict.UNAVAILABLE, reason_of(exc))

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding:
        started = time.perf_counter()
        turn = RetrievalTurn(query, agent, None, {h.id: h for h in previous.kept_hits}, [])
        feedback = [record_of(h) for h in previous.kept_hits]
        found, added_terms = await asyncio.to_thread(
            self._feedback, turn, feedback, WIDEN_K + len(turn.hits)
        )
        room = max(0, WIDEN_K - len(turn.hits))
        added = await self._keep(
            turn, select_hits(new_hits(found, turn), room, self.floor), RoundQuery.WIDEN
        )
        await emit(
            StatusFrame(
                text=f"retrieve widen · {count_of(len(added), 'new hit', 'new hits')}",
                query=RoundQuery.WIDEN.value,
                hits=len(added),
            )
        )
        hits = await self._ordered(turn)
        widened: RoundMeta = {
            "query": RoundQuery.WIDEN.value,
            "hits": len(added),
            "added_terms": list(added_terms),
            "ms": elapsed_ms(started),
        }
        return replace(
            previous,
            hits=hits,
            prompt_block=context_block(hits, answers=previous.verdict is not Verdict.NOTHING),
            meta={**previous.meta, "rounds": [*previous.meta.get("rounds", []), widened]},
        )

    def cites(self, reply: str, grounding: Grounding) -> bool:
        """Does the reply cite a kept hit (bot.chat.citation)?"""
        return cites(self.memory, reply, grounding)

    # -- rounds --------------------------------------------------------------------------

    async def _rounds(
        self,
        turn: RetrievalTurn,
        emit: Emit,
        words: asyncio.Future[tuple[str, ...]] | None = None,
        asked: Asked | None = None,
    ) -> None:
        await self._round(turn, RoundQuery.MESSAGE, emit, self._message_round)
        if asked is not None:
            await self._round(turn, RoundQuery.DENSE, emit, partial(self._dense_round, asked=asked))
        if words is not None:
            turn.words = await words  # asked while round 1 ran; () when the model said nothing
        if turn.focus is not None:
            await self._round(turn, RoundQuery.FOCUS, emit, self._focus_round)
        elif turn.semantic:
            await self._round(turn, RoundQuery.LINKS, emit, self._links_round)
        if turn.words and len(turn.semantic) < CHAT_K:
            await self._round(turn, RoundQuery.MODEL, emit, self._model_round)
        elif strong_hits(turn) and len(turn.semantic) < CHAT_K:
            await self._round(turn, RoundQuery.EXPANSION, emit, self._expansion_round)

    async def _round(self, turn: RetrievalTurn, kind: RoundQuery, emit: Emit, run: Round) -> None:
        started = time.perf_counter()
        added, detail = await run(turn)
        number = len(turn.rounds) + 1
        hits = sum(1 for h in added if not h.is_context)
        context = len(added) - hits
        entry: RoundMeta = {
            "round": number,
            "query": kind.value,
            "hits": hits,
            "context": context,
            "ids": [h.id for h in added],
            **detail,
            "ms": elapsed_ms(started),
        }
        turn.rounds.append(entry)
        text = f"retrieve {number}/{self.total} · {count_of(hits, 'hit', 'hits')}"
        if context:
            text += f" + {context} focus context"
        if model_words := detail.get("model_words"):
            text += f" · model words: {' '.join(model_words)}"
        if added_terms := detail.get("added_terms"):
            text += f" · expanded with {len(added_terms)} terms"
        if unavailable := detail.get("unavailable"):
            text += f" · dense ranking unavailable: {unavailable}"
        elif detail.get("dense_model") and self.hybrid is not None:
            # The round's meta keeps the model's setting whole; the operator reads its name.
            text += f" · fused with {self.hybrid.client.model_name} vectors"
        await emit(
            StatusFrame(
                text=text,
                reason=StatusReason.DENSE_UNAVAILABLE if unavailable else None,
                detail=unavailable or None,
                round=number,
                rounds=self.total,
                query=kind.value,
                hits=hits,
                context=context,
            )
        )

    async def _message_round(self, turn: RetrievalTurn) -> tuple[list[RetrievedHit], RoundMeta]:
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
        chosen = select_hits(found, room, self.floor)
        turn.lexical = tuple(h.chunk_id for h in found)  # what the dense round fuses with
        added = await self._keep(turn, chosen, RoundQuery.MESSAGE, grown=grown)
        return added, {"related_terms": list(grown.added)}

    async def _dense_round(
        self, turn: RetrievalTurn, *, asked: Asked
    ) -> tuple[list[RetrievedHit], RoundMeta]:
        """Round 1's ranking fused with the dense one (bot.chat.hybrid); its hits are kept
        and labelled like any (a chunk only the vectors found is weak)."""
        assert self.hybrid is not None
        found, detail = await self.hybrid.round(turn, asked)
        return await self._keep(turn, found, RoundQuery.DENSE), detail

    async def _focus_round(self, turn: RetrievalTurn) -> tuple[list[RetrievedHit], RoundMeta]:
        """The focused issue's own text and the PRs that close it come in as context (not
        floor-gated); then the chunks of its thread that match the question."""
        assert turn.focus is not None
        added, detail = await self._thread(turn, [turn.focus], recent=THREAD_RECENT)
        return added, {"focus": turn.focus, **detail}

    async def _links_round(self, turn: RetrievalTurn) -> tuple[list[RetrievedHit], RoundMeta]:
        """Without a focus, the best hit plays its part: its issue and the PRs that close it
        (`Fixes #N`, both ways) come in, and its thread's chunks that match the question are
        kept at the floor like any hit. A strong anchor's issue and PRs are context (given);
        a weak anchor's are only found: floor-gated and weak, without the newest chunks."""
        strong = strong_hits(turn)
        anchor = strong[0] if strong else max(turn.semantic, key=rank)
        if anchor.source == ChunkSource.PULL_REQUEST.value and anchor.links:
            issues = list(anchor.links)
        elif anchor.issue:
            issues = [anchor.issue]
        else:
            return [], {"followed": []}
        if strong:
            return await self._thread(turn, issues, recent=THREAD_RECENT)
        return await self._thread(turn, issues, recent=0, as_context=False)

    async def _thread(
        self,
        turn: RetrievalTurn,
        issues: list[int],
        *,
        recent: int,
        as_context: bool = True,
    ) -> tuple[list[RetrievedHit], RoundMeta]:
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
        fresh = [h for h in new_hits(found, turn) if h.chunk_id not in given]
        matched = select_hits(fresh, room, self.floor, margin=0.0)
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
        self, turn: RetrievalTurn, thread_issues: set[int], own: list[Record]
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

    async def _model_round(self, turn: RetrievalTurn) -> tuple[list[RetrievedHit], RoundMeta]:
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
            turn, select_hits(new_hits(found, turn), room, self.floor), RoundQuery.MODEL
        )
        return added, {"model_words": list(turn.words)}

    async def _expansion_round(self, turn: RetrievalTurn) -> tuple[list[RetrievedHit], RoundMeta]:
        """Rocchio feedback from the strong hits: the question plus their mid-frequency
        terms. Its new hits are weighed against each other (the feedback chunks themselves
        always match an expansion of their own terms best)."""
        feedback = [record_of(h) for h in strong_hits(turn)]
        room = min(EXPANSION_K, CHAT_K - len(turn.semantic))
        found, added_terms = await asyncio.to_thread(
            self._feedback, turn, feedback, room + len(turn.hits)
        )
        if not added_terms:  # nothing to ask that round 1 did not
            return [], {"added_terms": []}
        chosen = select_hits(new_hits(found, turn), room, self.floor)
        added = await self._keep(turn, chosen, RoundQuery.EXPANSION)
        return added, {"added_terms": list(added_terms)}

    async def _ordered(self, turn: RetrievalTurn) -> list[RetrievedHit]:
        """The kept hits in prompt order (bot.chat.ordering), each with its `thread`: a
        comment on a pull request belongs to the thread of the issue the PR closes."""
        numbers = {h.issue for h in turn.hits.values() if h.issue}
        closes = (
            await asyncio.to_thread(self.memory.closes, numbers, repo=turn.agent.repo)
            if numbers
            else {}
        )
        for hit in list(turn.hits.values()):
            if hit.issue:
                thread = min(closes.get(hit.issue) or hit.links or [hit.issue])
                turn.hits[hit.id] = msgspec.structs.replace(hit, thread=thread)
        return ordered(list(turn.hits.values()), state=asks_state(turn.query))

    def _feedback(
        self, turn: RetrievalTurn, feedback: list[Record], k: int
    ) -> tuple[list[Hit], tuple[str, ...]]:
        hits, grown = self.memory.feedback_search(
            turn.query, feedback, repo=turn.agent.repo, focus=turn.focus, k=k, floor=self.floor
        )
        return hits, grown.added

    async def _keep(
        self,
        turn: RetrievalTurn,
        hits: list[Hit],
        kind: RoundQuery,
        *,
        strength: Strength | None = None,
        grown: Expansion | None = None,
    ) -> list[RetrievedHit]:
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
        distinctive = await asyncio.to_thread(self._distinctive, turn.query, records)
        added = [
            msgspec.structs.replace(
                retrieved(hit, kind),
                distinctive=terms,
                strength=strength or (Strength.STRONG if score >= STRONG_SCORE else Strength.WEAK),
                question_score=round(score, 4),
                matched=round(matched, 4),
            )
            for hit, terms, score, matched in zip(
                hits, distinctive, whole, coordination, strict=True
            )
        ]
        turn.hits.update((hit.id, hit) for hit in added)
        return added

    def _distinctive(self, query: str, records: list[Record]) -> list[tuple[str, ...]]:
        return [tuple(self.memory.distinctive(r.text, exclude=query)) for r in records]
