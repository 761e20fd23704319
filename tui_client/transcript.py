"""The widgets of the Chat transcript: operator messages, streamed replies, notices.

An `AssistantMessage` streams: thinking shows inline as it arrives and collapses into a
"Thinking" section once the reply starts; reply deltas stream as Markdown; a `replace` delta
(the grounded second draft) discards what was shown; `done` swaps in the final text and adds
the `retrieve N hits` row, the Decision draft and what was filed (spec: Chat, SSE stream).
"""

from __future__ import annotations

import re
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tui_client.sessions_wire import Message

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


def hit_line(hit: dict[str, Any]) -> str:
    """One retrieved chunk as `source · score 0.42 · #12 · preview`."""
    parts = [str(hit.get("source") or "memory")]
    score = hit.get("score")
    if isinstance(score, int | float):
        parts.append(f"score {score:.2f}")
    if hit.get("issue"):
        parts.append(f"#{hit['issue']}")
    elif hit.get("session_id"):
        parts.append(f"session {hit['session_id']}")
    preview = " ".join(str(hit.get("preview") or hit.get("text") or "").split())
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


def response_from_message(message: Message) -> dict[str, Any]:
    """A stored assistant message in the shape of a `done` ChatResponse (for reopening)."""
    meta = message.meta or {}
    filed = meta.get("filed") or {}
    return {
        "reply": message.content,
        "reasoning": message.reasoning or "",
        "intent": message.intent,
        "retrieve_hits": meta.get("retrieve_hits", 0),
        "retrieved": meta.get("retrieved") or [],
        "memory_verdict": meta.get("memory_verdict"),
        "notes": meta.get("notes") or [],
        "filed_issue_number": filed.get("number"),
        "filed_issue_url": filed.get("url"),
        "filed_task_started": bool(filed.get("task_started")),
    }


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
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield self.thinking
        yield self.reply

    async def add_thinking(self, text: str) -> None:
        self.reasoning += text
        self.thinking_text.update(self.reasoning)
        self.thinking.display = True
        self.thinking.title = THINKING_LIVE
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
        self, response: dict[str, Any], *, decision: tuple[str, int] | None = None
    ) -> None:
        """The turn is done: the finalized text replaces the streamed one. `streaming` ends
        once all of it is on screen (the Markdown parses in a thread: slow on a busy machine)."""
        await self._stop_stream()
        self.reply_text = str(response.get("reply") or "")
        await self.reply.update(hard_breaks(self.reply_text))
        reasoning = response.get("reasoning")
        if reasoning:
            self.reasoning = str(reasoning)
            self.thinking_text.update(self.reasoning)
            self.thinking.display = True
        self._collapse_thinking()
        await self.mount_all(self._extras(response, decision))
        self.streaming = False

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
        self, response: dict[str, Any], decision: tuple[str, int] | None
    ) -> list[Static | Collapsible]:
        extras: list[Static | Collapsible] = []
        if decision is not None:
            body, issue = decision
            extras.append(
                Static(f"Decision draft for #{issue}:\n{body}", markup=False, classes="decision")
            )
        retrieved = list(response.get("retrieved") or [])
        count = int(response.get("retrieve_hits") or 0)
        if retrieved or count:
            lines = [Static(hit_line(hit), markup=False, classes="hit") for hit in retrieved]
            self.hits = Collapsible(
                *lines,
                title=hits_title(count, len(retrieved), response.get("memory_verdict")) + HITS_HINT,
                collapsed=True,
                classes="hits",
            )
            extras.append(self.hits)
        number = response.get("filed_issue_number")
        if number:
            started = " · task started" if response.get("filed_task_started") else ""
            extras.append(
                Notice(
                    f"Filed #{number} {response.get('filed_issue_url') or ''}{started}".replace(
                        "  ", " "
                    ),
                    kind="filed",
                )
            )
        for note in response.get("notes") or []:
            extras.append(Notice(str(note), kind="note"))
        return extras
