"""The widgets of the Chat transcript: operator messages, streamed replies, notices.

An `AssistantMessage` streams: thinking shows inline as it arrives and collapses into a
"Thinking" section once the reply starts; reply deltas stream as Markdown; a `replace` delta
(the grounded second draft) discards what was shown; `done` swaps in the final text and adds
the `retrieve N hits` row, the Decision draft and what was filed (spec: Chat, SSE stream).
"""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tui_client.reply import FinishedReply, Hit

THINKING_LIVE = "Thinking…"
THINKING_DONE = "Thinking (ctrl+t)"
HITS_HINT = " (ctrl+g)"


_FENCE = re.compile(r"^\s*(```|~~~)")


def hard_breaks(text: str) -> str:
    """Markdown joins lines separated by one newline into one paragraph; a chat reply means
    each line. Outside code fences, a line followed by another non-blank line ends with a
    hard break."""
    lines = text.split("\n")
    fenced = False
    out: list[str] = []
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        following = lines[index + 1] if index + 1 < len(lines) else ""
        breaks = (
            not fenced
            and not _FENCE.match(line)
            and line.strip()
            and following.strip()
            and not _FENCE.match(following)
            and not line.endswith(("  ", "\\"))
        )
        out.append(line + "  " if breaks else line)
    return "\n".join(out)


class UserMessage(Static):
    def __init__(self, text: str) -> None:
        super().__init__(text, markup=False, classes="user-message")
        self.text = text


class Notice(Static):
    """A line in the transcript that is not a message: an error, a stop, a filing."""

    def __init__(self, text: str, *, kind: str = "info") -> None:
        super().__init__(text, markup=False, classes=f"notice {kind}")
        self.text = text
        self.kind = kind


def decision_text(body: str, issue: int) -> str:
    return f"Decision draft for #{issue}:\n{body}"


def hit_line(hit: Hit) -> str:
    """One retrieved chunk as `source · score 0.42 · #12 · preview`."""
    parts = [hit.source or "memory"]
    if hit.score is not None:
        parts.append(f"score {hit.score:.2f}")
    if hit.issue:
        parts.append(f"#{hit.issue}")
    elif hit.session_id:
        parts.append(f"session {hit.session_id}")
    preview = " ".join(hit.preview.split())
    if preview:
        parts.append(preview)
    return " · ".join(parts)


def hits_title(injected: int, listed: int, verdict: str | None = None) -> str:
    """`retrieve N hits`; with no semantic hits the list holds recent session summaries
    (spec: Retrieve grounding, recency fallback), and the title says so; when memory has
    nothing that answers the question (the turn's verdict), the hits are the closest."""
    if injected == 0 and listed:
        return f"retrieve 0 hits · (no semantic hits) {listed} recent " + (
            "summary" if listed == 1 else "summaries"
        )
    if verdict == "nothing" and injected:
        return f"retrieve {injected} hits · nothing answers this: closest, not an answer"
    return f"retrieve {injected} hits"


class AssistantMessage(Vertical):
    """One assistant reply, live while its turn streams, then final."""

    def __init__(self, *, reply: str = "", reasoning: str = "", streaming: bool = True) -> None:
        super().__init__(classes="assistant-message")
        self.reply_text = reply
        self.reasoning = reasoning
        self.streaming = streaming
        self.thinking_text = Static(reasoning, markup=False, classes="thinking-text")
        self.thinking = Collapsible(
            self.thinking_text,
            title=THINKING_LIVE if streaming else THINKING_DONE,
            collapsed=not streaming,
            classes="thinking",
        )
        self.thinking.display = bool(reasoning)
        self.reply = Markdown(reply, classes="reply")
        self.hits: Collapsible | None = None
        self.decision_box: Static | None = None  # the Decision draft under the reply
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield self.thinking
        yield self.reply

    async def add_thinking(self, text: str) -> None:
        first = not self.thinking.display
        self.reasoning += text
        self.thinking_text.update(self.reasoning)
        self.thinking.display = True
        self.thinking.title = THINKING_LIVE
        if first:  # opened as it appears; closed with ctrl+t meanwhile, it stays closed
            self.thinking.collapsed = False

    async def add_delta(self, text: str, *, replace: bool = False) -> None:
        self._collapse_thinking()
        if replace:
            # A second, grounded draft replaces the first; it is never concatenated.
            await self._stop_stream()
            self.reply_text = ""
            await self.reply.update("")
        self.reply_text += text
        if self._stream is None:
            self._stream = Markdown.get_stream(self.reply)
        await self._stream.write(text)

    async def finish(
        self, finished: FinishedReply, *, decision: tuple[str, int] | None = None
    ) -> None:
        """The turn is done: the finalized text replaces the streamed one. `streaming` ends
        once all of it is on screen (the Markdown parses in a thread: slow on a busy machine)."""
        await self._stop_stream()
        self.reply_text = finished.text
        await self.reply.update(hard_breaks(self.reply_text))
        if finished.reasoning:
            self.reasoning = finished.reasoning
            self.thinking_text.update(self.reasoning)
            self.thinking.display = True
        self._collapse_thinking()
        await self.mount_all(self._extras(finished, decision))
        self.streaming = False

    def show_decision(self, body: str, issue: int) -> None:
        """The draft under this reply, edited (`D`): it shows what `P` publishes."""
        if self.decision_box is not None:
            self.decision_box.update(decision_text(body, issue))

    async def warn(self, text: str, *, kind: str = "error") -> None:
        """A notice under the reply that does not end it, kept when the reply finishes: a
        frame it could not read (an error), frames of the turn that were not relayed (a
        warning). Said once: the same notice again tells the operator nothing more."""
        if any(notice.text == text for notice in self.query(Notice)):
            return
        await self.mount(Notice(text, kind=kind))

    async def fail(self, text: str, *, kind: str = "error") -> None:
        await self._stop_stream()
        self._collapse_thinking()
        self.add_class("failed")
        await self.mount(Notice(text, kind=kind))
        self.streaming = False

    def _collapse_thinking(self) -> None:
        self.thinking.collapsed = True
        self.thinking.title = THINKING_DONE

    async def _stop_stream(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()

    def _extras(
        self, finished: FinishedReply, decision: tuple[str, int] | None
    ) -> list[Static | Collapsible]:
        extras: list[Static | Collapsible] = []
        if decision is not None:
            self.decision_box = Static(decision_text(*decision), markup=False, classes="decision")
            extras.append(self.decision_box)
        retrieved, count = finished.hits, finished.hit_count
        if retrieved or count:
            lines = [Static(hit_line(hit), markup=False, classes="hit") for hit in retrieved]
            self.hits = Collapsible(
                *lines,
                title=hits_title(count, len(retrieved), finished.memory_verdict) + HITS_HINT,
                collapsed=True,
                classes="hits",
            )
            extras.append(self.hits)
        if finished.filed is not None:
            filed = finished.filed
            started = " · task started" if filed.task_started else ""
            text = f"Filed #{filed.number} {filed.url}{started}".replace("  ", " ")
            extras.append(Notice(text, kind="filed"))
        extras.extend(Notice(note, kind="note") for note in finished.notes)
        return extras
