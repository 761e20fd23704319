"""The footer of key bindings, rebuilt only when the keys it shows change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# What the footer is drawn from for one key: its binding, whether it is enabled, its tooltip.
ShownKey = tuple[Binding, bool, str]


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

    async def recompose(self) -> None:
        if not self._bindings_ready or not self.is_attached:
            await super().recompose()
            return
        keys = self._keys()
        if keys == self._shown:
            return
        self._shown = keys
        await super().recompose()

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                # A key starts compact and is then bound to the footer's `compact`: styled
                # again twice as it mounts (the class added, then removed). Given the
                # footer's value up front, neither changes its classes.
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget
