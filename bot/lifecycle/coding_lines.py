"""The coding command's stdout lines as the worker reads them: the protocol's Structs
(bot/contracts/coding_protocol.py; docs/lifecycle.md, "The coding command"), one decoder.

The command is any program (a preset's adapter, or a third party's command speaking the
protocol), and hostile code all the same, so nothing it prints may break the reader. What
the protocol's user can count on:

* a line that is not JSON, JSON that is not an object with a string `type`, and an object of
  a type the protocol does not have are log text (kept in the run's log), as they always
  were: the protocol may gain line types;
* keys a line's type does not have are ignored (a command may say more than the worker reads),
  and a `usage` line may leave out a total it does not keep (0: `Usage`'s defaults);
* a line of a protocol type in a shape the protocol does not have (a required key missing,
  `null`, a value of another type: `"input_tokens": "12"`, a `status` the protocol does not
  list) is not read: the run's log gets a line naming the key, and the run goes on as after
  a line of an unknown type. Values are the JSON types the protocol shows: a number is a
  JSON number, and a string of digits is malformed, not guessed at (its log line tells the
  command's author at the first run). A malformed `result` line is no answer: unless a
  well-formed one follows, the run fails saying its result line was malformed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from bot.contracts.coding_protocol import AgentEvent
from bot.contracts.tagged_json import TaggedDecoder

LINES: TaggedDecoder[AgentEvent] = TaggedDecoder(AgentEvent)
# msgspec's one message that quotes the value it refused; the rest name types and keys only.
_ECHOED = re.compile(r"^Invalid enum value .*?(?P<at> - at `\$[^`]*`)$", re.DOTALL)


class _Kind(msgspec.Struct):
    type: str


_KIND = msgspec.json.Decoder(_Kind)


@dataclass(frozen=True)
class Malformed:
    """A line of a protocol type in a shape the protocol does not have."""

    kind: str  # the line's type: one the protocol has, never the command's own text
    problem: str  # which key, and what is wrong with it (never the command's value)

    def note(self) -> str:
        """For the run's log."""
        return f"the coding command printed a malformed `{self.kind}` line ({self.problem})"


def read_line(line: str) -> AgentEvent | Malformed | None:
    """The line as its protocol Struct, `Malformed` when it is of a protocol type in another
    shape, or None when it is not a protocol line (log text)."""
    try:
        return LINES.decode(line)
    except msgspec.ValidationError as exc:
        try:
            kind = _KIND.decode(line).type
        except msgspec.ValidationError:
            return None  # not an object, or one without a string `type`
        # LINES raises only for a type it knows: `kind` is one of the protocol's own words.
        return Malformed(kind, _problem(exc))
    except msgspec.DecodeError:
        return None  # not JSON: the command's own text


def _problem(exc: msgspec.ValidationError) -> str:
    """msgspec's words (`Expected int, got str - at $.input_tokens`), the key named and the
    command's value left out: the run's log is read by operators, and the value is the
    command's (a secret it leaked, markup)."""
    text = str(exc)
    echoed = _ECHOED.match(text)
    if echoed:
        return f"a value the protocol does not list{echoed.group('at')}"
    return text[:300]
