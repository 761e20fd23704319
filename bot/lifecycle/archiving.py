"""Undoing an archive: a task the operator archived comes back to the Board (the GUI's Undo
after Archive). Archiving itself is `board.archive`; both only flip `Task.archived`
and record who did it, so neither touches GitHub or the task's state."""

from __future__ import annotations

from sqlalchemy.orm import Session

from bot.clock import Clock, utcnow
from bot.db import Database
from bot.lifecycle import tasks
from bot.lifecycle.models import EventKind


async def unarchive(db: Database, task_id: int, *, actor: str, clock: Clock = utcnow) -> bool:
    """Show an archived task on the Board again. Idempotent: a task that is not archived is
    left as it is (False); an unknown task is a 404 (`tasks.get_task`)."""

    def apply(session: Session) -> bool:
        task = tasks.get_task(session, task_id)
        if not task.archived:
            return False
        task.archived = False
        task.updated_at = clock()
        tasks.record(
            session, task, EventKind.UNARCHIVED, actor=actor, detail="unarchived", clock=clock
        )
        return True

    return await db.run(apply)
