"""Inline `<think>...</think>` reasoning in streamed content, split from the reply.

Servers that serve reasoning models without a reasoning parser (llama.cpp without
`--reasoning-format`, plain vLLM, many proxies) leave the tags in `content`. Tags can be cut
across chunks, so a possible partial tag at the end of a chunk is held back until the next.
"""

from __future__ import annotations

OPEN = "<think>"
CLOSE = "</think>"


class ThinkTagSplitter:
    def __init__(self) -> None:
        self._inside = False
        self._pending = ""
        self._strip_next = False  # the reply after `</think>` usually starts with newlines

    def feed(self, text: str) -> list[tuple[bool, str]]:
        """(is_thinking, text) pieces of this chunk that are certain by now."""
        if not self._pending and "<" not in text:  # the common chunk: no tag can start here
            out: list[tuple[bool, str]] = []
            self._emit(out, text)
            return out
        out = []
        buffer = self._pending + text
        self._pending = ""
        while buffer:
            tag = CLOSE if self._inside else OPEN
            index = buffer.find(tag)
            if index >= 0:
                self._emit(out, buffer[:index])
                buffer = buffer[index + len(tag) :]
                self._inside = not self._inside
                self._strip_next = not self._inside
                continue
            keep = _partial_suffix(buffer, tag)
            self._emit(out, buffer[: len(buffer) - keep])
            self._pending = buffer[len(buffer) - keep :]
            break
        return out

    def flush(self) -> list[tuple[bool, str]]:
        out: list[tuple[bool, str]] = []
        self._emit(out, self._pending)
        self._pending = ""
        return out

    def _emit(self, out: list[tuple[bool, str]], text: str) -> None:
        if not self._inside and self._strip_next:
            text = text.lstrip()
            if not text:
                return
            self._strip_next = False
        if text:
            out.append((self._inside, text))


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that could begin `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
