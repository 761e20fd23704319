"""The footer of key bindings (rebuilt only when the keys it shows change), and the keys
help: every key the screen offers, for a terminal too narrow for the footer to show them."""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Label, Static
from textual.widgets._footer import FooterKey

# What the footer is drawn from for one key: its binding, whether it is enabled, its tooltip.
ShownKey = tuple[Binding, bool, str] | bool  # (and last: whether the footer is compact)
# The app's binding that opens the keys help: shown first in the footer, so it is never
# the key a narrow terminal cuts (the footer fills from the left; the app's keys come last).
HELP_ACTION = "show_keys"
# Narrower than this, the footer is compact (a column less per key) and leaves out the
# command palette's key, drawn over the others on the right (the help lists it).
WIDE = 100


class KeysFooter(Footer):
    """Textual's Footer rebuilds all its keys (a dozen widgets) whenever the screen's bindings
    may have changed: every focus change, every modal opened or closed, every
    `refresh_bindings`. Most of those leave the keys as they were: this one rebuilds only
    when what it would show differs from what it shows, and mounts each key styled once."""

    def __init__(self) -> None:
        super().__init__()
        self._shown: tuple[ShownKey, ...] | None = None

    def _keys(self) -> tuple[ShownKey, ...]:
        """What `compose` shows: the shown bindings of the screen's active ones, and the
        command palette's when it shows its key."""
        active = self.screen.active_bindings
        keys = [(b.binding, b.enabled, b.tooltip) for b in active.values() if b.binding.show]
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        if palette is not None and self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            keys.append((palette.binding, palette.enabled, palette.tooltip))
        return tuple(keys)

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < WIDE
        if narrow != self.compact:
            self.compact = narrow
            self.show_command_palette = not narrow
            self.call_after_refresh(self.recompose)

    async def recompose(self) -> None:
        if not self._bindings_ready or not self.is_attached:
            await super().recompose()
            return
        keys = (*self._keys(), self.compact)
        if keys == self._shown:
            return
        self._shown = keys
        await super().recompose()

    def compose(self) -> ComposeResult:
        shown = list(super().compose())
        helps = [w for w in shown if isinstance(w, FooterKey) and w.action == HELP_ACTION]
        room = self.app.size.width
        for widget in [*helps, *(w for w in shown if w not in helps)]:
            if isinstance(widget, FooterKey):
                if self.compact:
                    # Narrow: whole keys only, as many as fit; the keys help lists the rest.
                    room -= compact_width(widget)
                    if room < 0:
                        return
                # A key starts compact and is then bound to the footer's `compact`: styled
                # again twice as it mounts (the class added, then removed). Given the
                # footer's value up front, neither changes its classes.
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget


def compact_width(key: FooterKey) -> int:
    """The columns a compact footer gives a key: "^n New chat" and a space after it."""
    return cell_len(key.key_display) + 1 + cell_len(key.description) + 1


def key_lines(screen: Screen[object]) -> list[str]:
    """Every key the footer of `screen` would show with room for all, one line an action,
    with the other keys of that action ("^f/f  Focus #N": `f` is not in the footer) and the
    command palette's; one not usable now says so. (Not the widgets' own editing and
    cursor keys, which Textual keeps out of the footer too.)"""
    app = screen.app
    active_bindings = screen.active_bindings
    footer = {b.binding.action for b in active_bindings.values() if b.binding.show}
    palette = active_bindings.get(app.COMMAND_PALETTE_BINDING)
    if palette is not None and app.ENABLE_COMMAND_PALETTE:
        footer.add(palette.binding.action)
    by_action: dict[str, tuple[list[str], str, bool]] = {}
    for active in active_bindings.values():
        binding = active.binding
        if binding.action not in footer or binding.action == HELP_ACTION:
            continue
        keys, _, enabled = by_action.setdefault(binding.action, ([], binding.description, False))
        display = app.get_key_display(binding)
        if display not in keys:
            keys.append(display)
        by_action[binding.action] = (keys, binding.description, enabled or active.enabled)
    width = max((len("/".join(keys)) for keys, _, _ in by_action.values()), default=0)
    return [
        f"{'/'.join(keys):<{width}}  {description}{'' if enabled else ' (not now)'}"
        for keys, description, enabled in by_action.values()
    ]


class KeysScreen(ModalScreen[None]):
    """The keys help: what the screen beneath offers, listed whole (the footer of an
    80-column terminal shows only the first few)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,f3,question_mark", "close", "Close")]

    def __init__(self, lines: list[str]) -> None:
        super().__init__(classes="modal")
        self.lines = lines

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog keys-help"):
            yield Label("Keys", classes="question")
            with VerticalScroll():
                yield Static("\n".join(self.lines), markup=False, id="keys-help-text")
            yield Label("esc close", classes="hint")

    def action_close(self) -> None:
        self.dismiss(None)
