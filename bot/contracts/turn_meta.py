"""A chat turn's metadata, declared once: every key the stored message's `meta` object may
carry (the `chat_turns.meta` column, `Message.meta` on the wire), with its type.

TypedDicts, like `bot.contracts.tasks.EventData`: the stored JSON stays the plain object it
always was (keys present only when the turn has them, in the order they are written), and
mypy checks each writer's keys and value types (bot/chat/turn.py, bot/chat/retrieval.py,
bot/chat/committed_context.py, bot/lifecycle/delivery.py) and each reader's (the `result`
frame in bot/lifecycle/announce.py, the prompt's history in bot/chat/prompt.py). msgspec
describes TypedDicts, so the OpenAPI document's `TurnMeta` component is generated from these
(operator_api/schemas.py; an `object` value, passed through unread, is any JSON). This
module imports nothing of ours: every layer may use it.
"""

from __future__ import annotations

from typing import TypedDict


class RoundMeta(TypedDict, total=False):
    """One retrieval round (bot.chat.retrieval): what it asked and what it kept."""

    round: int  # its number in the turn (the widening after an uncited draft has none)
    query: str  # bot.contracts.hits.RoundQuery value
    hits: int  # semantic hits kept
    context: int  # focus or link context given (not hits)
    ids: list[int]  # the chunks kept, hits and context
    related_terms: list[str]  # the message round: terms memory.related added
    focus: int  # the focus round: the focused issue
    followed: list[int]  # focus and links rounds: the issues whose threads were read
    closing_prs: list[int]  # ...and the pull requests closing them
    model_words: list[str]  # the model round: the search words the model proposed
    added_terms: list[str]  # expansion and widen: the feedback terms
    # The dense round (bot.chat.hybrid): its embeddings model, the fused ranking's head, the
    # hits only the dense vectors found, chunks embedded this turn, chunks still waiting for
    # a vector (embedded in the background), and why it gave nothing when it could not run.
    dense_model: str
    fused: list[int]
    dense_only: list[int]
    embedded: int
    backfilling: int
    unavailable: str
    ms: float


class IndexMeta(TypedDict):
    added: int  # chunks the turn's catch-up indexed
    behind: bool  # more rows wait than one catch-up takes


class CommittedMeta(TypedDict):
    files: list[str]
    truncated: list[str]
    omitted: list[str]
    skipped: list[str]


class AnswerabilityMeta(TypedDict):
    """bot.chat.grounding.Answerability, field by field (its comments say what each is)."""

    verdict: str
    reason: str
    coverage: float
    spread: float
    model_words: float
    best: float
    margin: float
    agreement: bool
    fits: bool
    missing: list[str]
    unknown_share: float
    missing_peak: float
    terms: int
    held: int
    agreeing_rounds: int
    thread_fits: bool
    kind_missing: str
    about_focus: bool
    score: float


class RetrievalMeta(TypedDict, total=False):
    """What a turn's grounding says about itself (bot.chat.grounding.Grounding.meta); the
    turn adds `available` and `recency_fallback` in front."""

    available: bool
    recency_fallback: bool
    floor: float  # the thresholds in force (bot.chat.retrieval_hits)
    margin: float
    strong: float
    committed: CommittedMeta
    rounds: list[RoundMeta]
    index: IndexMeta
    answerability: AnswerabilityMeta
    # "ok", "recency fallback", "unavailable", "not configured"
    retrieval: str
    reason: str  # why retrieval was unavailable
    error: str  # the grounder itself failed: the exception's class
    own_text_dropped: int  # Steelframe's status comments dropped from the hits


class UsageMeta(TypedDict):
    """A turn's tokens, both drafts' when it was re-drafted (both were paid for)."""

    input_tokens: int
    output_tokens: int


class ContextMeta(TypedDict):
    """bot.runtimes.base.ContextBudget: the model's window and what trimming the history to
    it kept."""

    window: int
    before_tokens: int
    after_tokens: int
    before_messages: int
    after_messages: int
    trimmed: bool


class TimingsMeta(TypedDict):
    first_frame_ms: float | None
    total_ms: float


class LinkedPullMeta(TypedDict):
    """The pull request of Steelframe's branch for the focused issue."""

    number: int
    title: str
    state: str  # "open", "closed" or "merged"
    url: str


class IssueFactsMeta(TypedDict):
    """The focused issue as the turn read it (bot.chat.issue_context.IssueContext.facts);
    its body and comments are in the prompt, not here."""

    repo: str
    number: int
    title: str
    state: str
    labels: list[str]
    url: str
    comments: int  # the comments kept
    pull: LinkedPullMeta | None


class TurnMeta(TypedDict, total=False):
    """A stored message's metadata: empty for the operator's message; an answered turn's
    (bot/chat/turn.py FinishedTurn.meta), a delivered task result's (`kind`
    "task_result", bot/lifecycle/delivery.py), or a turn the service cut while stopping or
    whose instance went away (`kind` "turn_cut", with `agent` and `focus`: bot/chat/turn.py
    cut_record)."""

    # An answered turn.
    model: str
    endpoint: str
    requested_model: str
    usage: UsageMeta
    cost_usd: float | None
    context: ContextMeta | None
    timings: TimingsMeta
    retrieval: RetrievalMeta
    retrieve_hits: int
    retrieved: list[dict[str, object]]  # bot.contracts.hits.RetrievedHit, as JSON
    memory_verdict: str
    answerability: AnswerabilityMeta
    # An answered turn's focused issue (bot.chat.issue_context.IssueContext.facts); a
    # delivered result's issue number (one key, two writers, as stored since the start).
    issue: IssueFactsMeta | int | None
    issue_error: str | None
    redrafted: bool
    trailer_malformed: bool
    focus: int | None
    agent: str
    filed: dict[str, object]  # bot.chat.intents.IntentOutcome.filed
    notes: list[str]
    pending: dict[str, str] | None  # bot.chat.proposals.Proposal.as_json
    # A delivered task result.
    kind: str  # "task_result", "turn_cut" (a cut turn's note) or "filed" (/chat/file's note)
    task_id: int
    repo: str
    state: str | None
    pr_url: str | None
    event_id: int
