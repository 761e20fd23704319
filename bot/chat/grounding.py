"""The grounding seam of a chat turn: what retrieval gives the prompt, and the citation check.

`memory` provides the real grounder (retrieve rounds, floor, recency fallback, committed
memory); `NoGrounding` is used where no memory is wired (it retrieves nothing and says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from bot.config import AgentConfig
from bot.contracts.chat import Emit
from bot.contracts.hits import RetrievedHit
from bot.contracts.tasks import FocusedTask
from bot.contracts.turn_meta import AnswerabilityMeta, RetrievalMeta
from memory.committed import CommittedFile

NO_SEMANTIC_HITS = "(no semantic hits)"


class Verdict(StrEnum):
    """Does session memory answer this turn's question? (bot/chat/retrieval.py decides.)"""

    ANSWERS = "answers"
    NOTHING = "nothing"  # the kept hits, if any, are the closest chunks, not an answer
    UNAVAILABLE = "unavailable"  # retrieval failed or no memory is wired


@dataclass(frozen=True)
class Answerability:
    """The verdict and the evidence it was decided on (shown in the turn's metadata)."""

    verdict: Verdict
    reason: str
    coverage: float = 0.0  # idf-weighted share of the question one thread of the top holds
    spread: float = 0.0  # ...that the top hits hold together
    model_words: float = 0.0  # share of the model's search words one thread holds
    best: float = 0.0  # the best hit's cosine with the whole question
    margin: float = 0.0  # the best thread's rank over the next thread's
    agreement: bool = False  # later rounds found more of the best hit's thread
    fits: bool = False  # the best hit's source is what the question's kind asks for
    missing: tuple[str, ...] = ()  # distinctive question terms no top hit contains
    unknown_share: float = 0.0  # idf share of the question in terms no chunk contains
    missing_peak: float = 0.0  # idf share of the most distinctive term the thread lacks
    terms: int = 0  # the question's distinct terms
    held: int = 0  # ...that the covering thread contains whole
    agreeing_rounds: int = 0  # rounds that kept a hit of the best hit's thread (1 to 3)
    thread_fits: bool = False  # a hit of the best hit's thread is the source the kind asks for
    # The kind of answer asked for ("count", "share"...) the covering thread holds no value
    # of (bot.chat.answer_kind); "" when the question asks for none, or the thread holds one.
    kind_missing: str = ""
    # In a Discuss session, a question in words memory knows: about the given thread.
    about_focus: bool = False
    score: float = 0.0  # the calibrated verdict's probability that memory answers

    def to_json(self) -> AnswerabilityMeta:
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "coverage": self.coverage,
            "spread": self.spread,
            "model_words": self.model_words,
            "best": self.best,
            "margin": self.margin,
            "agreement": self.agreement,
            "fits": self.fits,
            "missing": list(self.missing),
            "unknown_share": self.unknown_share,
            "missing_peak": self.missing_peak,
            "terms": self.terms,
            "held": self.held,
            "agreeing_rounds": self.agreeing_rounds,
            "thread_fits": self.thread_fits,
            "kind_missing": self.kind_missing,
            "about_focus": self.about_focus,
            "score": self.score,
        }


UNAVAILABLE = Answerability(Verdict.UNAVAILABLE, "retrieval unavailable")


@dataclass(frozen=True)
class Grounding:
    hits: list[RetrievedHit] = field(default_factory=list)
    recency_fallback: bool = False
    committed_memory: list[CommittedFile] = field(default_factory=list)
    available: bool = True
    prompt_block: str = f"Prior Steelframe context:\n{NO_SEMANTIC_HITS}"
    committed_block: str = ""
    task: FocusedTask | None = None
    meta: RetrievalMeta = field(default_factory=lambda: RetrievalMeta())
    answerability: Answerability = UNAVAILABLE

    @property
    def verdict(self) -> Verdict:
        return self.answerability.verdict

    @property
    def kept_hits(self) -> list[RetrievedHit]:
        """Semantic hits injected as retrieved context (recency summaries are not)."""
        return [] if self.recency_fallback else self.hits


class Grounder(Protocol):
    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding: ...

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding: ...

    def cites(self, reply: str, grounding: Grounding) -> bool: ...


class NoGrounding:
    async def ground(
        self, *, query: str, agent: AgentConfig, focus: int | None, emit: Emit
    ) -> Grounding:
        return Grounding(meta={"retrieval": "not configured"})

    async def widen(
        self, *, query: str, agent: AgentConfig, focus: int | None, previous: Grounding, emit: Emit
    ) -> Grounding:
        return previous

    def cites(self, reply: str, grounding: Grounding) -> bool:
        return True
