"""The Board panel: tasks by state, with Discuss, Terminate, Archive and the run log.

Reads GET /api/operator/board (a `tasks_wire.Board`); acting on a task asks first. `e` on a
task with an issue asks the app (a `Discuss` message) to start a Discuss chat on it; `l` shows
the task's private runtime log. When the workers run coding unisolated, the status line says
so.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowDoesNotExist

from tui_client.api import REQUEST_ERRORS, OperatorClient
from tui_client.coalesced import CoalescedLoad
from tui_client.events_wire import FixRunFrame, LedgerFrame, ReviewFrame, TaskFrame
from tui_client.failures import describe, while_mounted
from tui_client.modals import ConfirmScreen, LogScreen, log_text
from tui_client.task_detail import TaskDetailScreen, dollars
from tui_client.tasks_wire import BoardTask, LastEvent, ReviewCounts

# Live work first, then what needs the operator, then history.
STATE_ORDER = (
    "running",
    "waiting_for_info",
    "queued",
    "failed",
    "delivered",
    "merged",
    "closed",
    "terminated",
)
# (label, width): all six fit an 80-column terminal with the table's cell padding. A wider
# terminal's extra columns go to the Title (two thirds, up to TITLE_MOST) and the last column.
COLUMNS = (
    ("Issue", 6),
    ("Title", 18),
    ("State", 10),
    ("PR", 6),
    ("Cost", 6),
    ("Review / last event", 20),
)
FITS = 80  # the terminal width the COLUMNS are for
TITLE_MOST = 64  # a Title wider than most titles only moves the State away from them
STATE_SHORT = {"waiting_for_info": "waiting"}


def widths(available: int) -> tuple[int, ...]:
    """Each column's width on a Board `available` columns wide: COLUMNS' up to FITS, the
    rest shared by the Title and the last column, so a wide terminal shows whole titles."""
    base = [width for _, width in COLUMNS]
    spare = max(0, available - FITS)
    title = min(spare * 2 // 3, TITLE_MOST - base[1])
    base[1] += title
    base[-1] += spare - title
    return tuple(base)


def board_order(tasks: list[BoardTask]) -> list[BoardTask]:
    """Unarchived tasks grouped by state (in STATE_ORDER), newest issue first within one."""
    rank = {state: index for index, state in enumerate(STATE_ORDER)}
    live = [task for task in tasks if not task.archived]
    return sorted(live, key=lambda t: (rank.get(t.state, len(rank)), -t.issue))


def board_summary(tasks: list[BoardTask]) -> str:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.state] = counts.get(task.state, 0) + 1
    parts = [f"{state} {counts[state]}" for state in STATE_ORDER if counts.get(state)]
    return "Board · " + (" · ".join(parts) if parts else "no tasks")


def review_cell(task: BoardTask) -> str | None:
    """The pull request loop in the GUI card's words: "draft", the review ledger ("2 open ·
    3 addressed", the server's words) and "ready for review"; None before a pull request
    (and for merged or closed tasks, whose State says it all)."""
    if task.pr_state in (None, "merged", "closed"):
        return None
    parts = ["draft"] if task.pr_state == "draft" else []
    parts += [task.review.summary] if task.review.summary else []
    parts += ["ready for review"] if task.ready_for_review else []
    return " · ".join(parts) or None


def last_cell(task: BoardTask) -> str:
    """The last column: what a waiting task asks (the Board's `question`: the operator's
    next move), else the pull request loop, else the last event."""
    event = task.last_event
    last_event = (event.detail or event.kind) if event else ""
    return task.question or review_cell(task) or last_event


def with_frame(known: BoardTask, frame: TaskFrame | LedgerFrame) -> BoardTask:
    """A Board row after a `task` or `ledger` event: the frames carry what the row shows
    (state, pull request loop, a waiting task's question), so no reload is needed."""
    review = ReviewCounts(
        open=frame.review.open,
        addressed=frame.review.addressed,
        declined=frame.review.declined,
        needs_operator=frame.review.needs_operator,
        summary=frame.review.summary,
    )
    changed = msgspec.structs.replace(
        known,
        issue=frame.issue,
        title=frame.title,
        state=frame.state,
        pr_url=frame.pr_url,
        pr_state=frame.pr_state,
        review=review,
        ready_for_review=frame.ready_for_review,
    )
    if isinstance(frame, LedgerFrame):
        return changed
    return msgspec.structs.replace(
        changed,
        cost_usd=frame.cost_usd,
        tokens=frame.tokens,
        last_event=LastEvent(kind="transition", at=frame.updated_at, detail=frame.reason or None),
        updated_at=frame.updated_at,
        question=frame.question,
    )


def _row(task: BoardTask, sizes: tuple[int, ...]) -> tuple[str, ...]:
    last = last_cell(task)
    pull = (task.pr_url or "").rstrip("/").rsplit("/", 1)[-1]
    cells = (
        f"#{task.issue}" if task.issue else "-",
        task.title,
        STATE_SHORT.get(task.state, task.state),
        f"#{pull}" if pull.isdigit() else "",
        dollars(task.cost_usd),
        last,
    )
    return tuple(_fit(cell, width) for cell, width in zip(cells, sizes, strict=True))


def _label(task: BoardTask) -> str:
    return f"#{task.issue}" if task.issue else f"task {task.id}"


def _fit(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


class BoardTable(DataTable[str]):
    """The tasks, one a row; `enter` shows the selected one's detail (named in the footer:
    DataTable's own `enter` is not, and it is the key the Board is read with)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Details")]


class BoardPanel(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "detail", "Details"),
        Binding("e", "discuss", "Discuss"),
        Binding("t", "terminate", "Terminate"),
        Binding("a", "archive", "Archive"),
        Binding("l", "log", "Log"),
    ]

    class Discuss(Message):
        """Start a Discuss chat on this issue."""

        def __init__(self, issue: int) -> None:
            super().__init__()
            self.issue = issue

    def __init__(self, client: OperatorClient, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self.tasks: dict[str, BoardTask] = {}
        self.loads = CoalescedLoad(self, "board", self._load_once)
        self.sizes = widths(FITS)
        self.warning: str | None = None  # the coding sandbox's, from the last load

    def compose(self) -> ComposeResult:
        yield Static("Board", id="board-status", markup=False)
        table = BoardTable(id="board-table", cursor_type="row", zebra_stripes=True)
        for (label, _), width in zip(COLUMNS, self.sizes, strict=True):
            table.add_column(label, width=width)
        yield table

    def on_resize(self, event: events.Resize) -> None:
        """The columns follow the terminal's width: the rows are laid out again."""
        sizes = widths(event.size.width)
        if sizes == self.sizes:
            return
        self.sizes = sizes
        table = self.table
        table.clear(columns=True)
        for (label, _), width in zip(COLUMNS, sizes, strict=True):
            table.add_column(label, width=width)
        self._show_rows(list(self.tasks.values()))

    @property
    def table(self) -> DataTable[str]:
        return self.query_one("#board-table", DataTable)

    def set_status(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#board-status", Static)
        status.update(text)
        status.set_class(error, "error")

    def load(self) -> None:
        """Reload the Board (a tick of the app's timer, F2, ctrl+r, a task event, an action's
        end). An ask while a load runs does not cancel it: the Board is loaded once more
        after it (`CoalescedLoad`), so a Board slower to answer than the asks come shows."""
        self.loads.ask()

    async def _load_once(self) -> None:
        try:
            board = await self.client.board()
        except REQUEST_ERRORS as exc:
            self.set_status(f"Board unavailable: {describe(exc)}", error=True)
            return
        self.warning = board.coding_sandbox.warning
        self._show(board.tasks)

    def _show(self, tasks: list[BoardTask]) -> None:
        """The rows and the status line for these tasks."""
        tasks = board_order(tasks)
        self._show_rows(tasks)
        if self.warning:
            self.set_status(f"{board_summary(tasks)} · WARNING: {self.warning}", error=True)
        else:
            self.set_status(board_summary(tasks))

    def _show_rows(self, tasks: list[BoardTask]) -> None:
        """`tasks` in the table (in this order), the highlight kept on its task."""
        table = self.table
        selected = self.selected_task()
        table.clear()
        self.tasks = {}
        for task in tasks:
            key = str(task.id)
            self.tasks[key] = task
            table.add_row(*_row(task, self.sizes), key=key)
        if selected is not None and str(selected.id) in self.tasks:
            table.move_cursor(row=table.get_row_index(str(selected.id)))

    def selected_task(self) -> BoardTask | None:
        table = self.table
        if table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except RowDoesNotExist:
            return None
        return self.tasks.get(str(key.value))

    def task_changed(self, frame: TaskFrame | LedgerFrame | ReviewFrame | FixRunFrame) -> None:
        """A `task` event, or a `ledger` event (a review thread recorded or settled), for a
        listed task: its row takes what the frame carries and the Board is ordered and
        counted again, with no request (a load under way may have read the Board before the
        change: it is loaded once more after it). Otherwise the Board is reloaded: a task not
        listed (new, or archived: only the service knows), or a `review` or `fix_run` event
        (the row's last event)."""
        known = self.tasks.get(str(frame.task_id))
        if known is None or isinstance(frame, ReviewFrame | FixRunFrame):
            self.load()
            return
        task = with_frame(known, frame)
        self._show([*(t for t in self.tasks.values() if t.id != task.id), task])
        if self.loads.running:
            self.load()

    def action_detail(self) -> None:
        task = self.selected_task()
        if task is not None:
            self.show_detail(str(task.id))

    @work(exclusive=True, group="task-detail")
    @while_mounted
    async def show_detail(self, task_id: str) -> None:
        try:
            detail = await self.client.task(task_id)
        except REQUEST_ERRORS as exc:
            self.set_status(f"task {task_id}: {describe(exc)}", error=True)
            return
        await self.app.push_screen(TaskDetailScreen(detail))

    @on(DataTable.RowSelected, "#board-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.show_detail(str(event.row_key.value))

    def action_discuss(self) -> None:
        task = self.selected_task()
        if task is None or not task.issue:
            self.notify("Select a task with a GitHub issue to discuss it.", severity="warning")
            return
        self.post_message(self.Discuss(task.issue))

    def action_log(self) -> None:
        task = self.selected_task()
        if task is not None:
            self.show_log(task)

    @work(group="task-log")
    @while_mounted
    async def show_log(self, task: BoardTask) -> None:
        try:
            log = await self.client.task_log(task.id)
        except REQUEST_ERRORS as exc:
            self.set_status(f"log unavailable: {describe(exc)}", error=True)
            return
        label = _label(task)
        self.app.push_screen(LogScreen(f"Run log of {label} (private)", log_text(log)))

    def action_terminate(self) -> None:
        self._confirm("terminate", "Terminate")

    def action_archive(self) -> None:
        self._confirm("archive", "Archive")

    def _confirm(self, action: str, verb: str) -> None:
        task = self.selected_task()
        if task is None:
            return
        task_id = str(task.id)

        def answered(yes: bool | None) -> None:
            if yes:
                self.act(action, task_id)

        question = f"{verb} {_label(task)} {task.title}?".replace(" ?", "?")
        self.app.push_screen(ConfirmScreen(question), answered)

    @work(group="task-action")
    @while_mounted
    async def act(self, action: str, task_id: str) -> None:
        call = self.client.terminate if action == "terminate" else self.client.archive
        try:
            await call(task_id)
        except REQUEST_ERRORS as exc:
            self.set_status(f"{action} failed: {describe(exc)}", error=True)
            return
        self.load()
