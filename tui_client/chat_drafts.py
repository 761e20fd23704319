"""What the last reply left for the operator to act on: a Decision draft to edit and publish
(`D`, `P`), a filing proposal to file (`y`), and the focus the next message carries (`f`)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from textual.worker import Worker

from tui_client.chat_part import ChatPart
from tui_client.failures import UNANSWERED
from tui_client.modals import DecisionEditor, IssuePrompt
from tui_client.transcript import AssistantMessage


class Drafts(ChatPart):
    _acting: Worker[None] | None = None  # the last publish or filing

    def edit_decision(self) -> None:
        state = self.state
        if not (state.decision_body and state.decision_issue):
            return

        def edited(text: str | None) -> None:
            if text is not None and text.strip() and state.decision_issue is not None:
                state.edit_decision(text.strip())
                for message in reversed(list(self.transcript.query(AssistantMessage))):
                    if message.decision_box is not None:
                        message.show_decision(text.strip(), state.decision_issue)
                        break
                self.panel.refresh_status()
                self.panel.call_later(
                    self.panel.notice,
                    f"Decision draft for #{state.decision_issue} edited: P publishes it",
                )

        self.panel.app.push_screen(
            DecisionEditor(state.decision_issue, state.decision_body), edited
        )

    def choose_focus(self) -> None:
        """Set the focus (an issue number) or clear it (empty), for the next message."""
        if self.state.busy:  # refused, as ctrl+n is: the note says esc stops the turn
            self.panel.call_later(self.panel.refuse_while_busy)
            return

        def chosen(issue: int | None) -> None:
            if issue is None:
                return  # cancelled
            # 0 is the prompt's "empty": clear the focus. Sent with the next message.
            self.state.focus_change = issue or None
            self.state.focus = issue or None
            self.panel.refresh_status()

        current = self.state.focus
        question = "Focus on which issue? (empty clears the focus)"
        if current is not None:
            question = f"Focused on #{current}. Focus on which issue? (empty clears it)"
        self.panel.app.push_screen(IssuePrompt(question, allow_empty=True), chosen)

    def publish(self) -> None:
        self._once(self._publish)

    def _once(self, act: Callable[[], Awaitable[None]]) -> None:
        """A publish or a filing, unless one still waits for the service: the key pressed
        again meanwhile (the draft or the proposal shows until the answer comes) does
        nothing. Never instead of the one waiting: cancelling it would only stop waiting for
        its answer, not what the service does, and the new request (under a new key) would
        publish or file it a second time."""
        if self._acting is not None and not self._acting.is_finished:
            return
        self._acting = self.run("publish", act)

    async def _publish(self) -> None:
        state = self.state
        if not (state.decision_body and state.decision_issue):
            return
        issue = state.decision_issue
        request_id = uuid.uuid4().hex  # one press, one Decision (a retry posts nothing more)
        result = await self.panel.ask(
            self.client.publish_decision(
                issue=issue,
                body=state.decision_body,
                session_id=state.session_id,
                request_id=request_id,
            )
        )
        if result is UNANSWERED:
            return
        state.clear_decision()
        await self.panel.notice(
            f"Published the Decision to #{result.issue} {result.comment_url}".rstrip(),
            kind="published",
        )
        self.panel.refresh_status()

    def file(self) -> None:
        self._once(self._file)

    async def _file(self) -> None:
        state = self.state
        if not state.can_file:
            return
        title = state.pending_title
        result = await self.panel.ask(self.client.file_pending(session_id=state.session_id))
        if result is UNANSWERED:
            return
        state.pending_title = None
        started = " · task started" if result.filed_task_started else ""
        number, url = result.filed_issue_number, result.filed_issue_url
        await self.panel.notice(
            f'Filed #{number} "{title}" {url}{started}'.replace("  ", " "), kind="filed"
        )
        self.panel.refresh_status()
