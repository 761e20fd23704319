"""Failing CI: a head commit's failing checks as data (`ci_fixes.failing`, a JSON list of
{"name", "conclusion"}), in place of their names joined by ", " in `checks`, which split a
name holding ", " in two when read back (bot.lifecycle.ci_models.failing_checks). Rows from
before keep their names, one per joined part as they were read then, with conclusion ""
(not recorded).

Revision ID: 0035_ci_failing_checks
Revises: 0034_chat_pending_forgets
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0035_ci_failing_checks"
down_revision = "0034_chat_pending_forgets"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")
# The table's indexes, dropped before its rebuild and made again after it, in this order:
# SQLite's batch rebuild makes them again from a set, in an order that changed from one
# process to the next, so two upgraded databases were not the same file
# (tests/test_migrated.py compares a template's copy with a real upgrade byte for byte).
INDEXES = (("ix_ci_fixes_task_id", "task_id"), ("ix_ci_fixes_result_sha", "result_sha"))
ci_fixes = sa.table(
    "ci_fixes",
    sa.column("id", sa.Integer),
    sa.column("checks", sa.Text),
    sa.column("failing", JSONType),
)


def _drop_indexes() -> None:
    for name, _ in INDEXES:
        op.drop_index(name, table_name="ci_fixes")


def _create_indexes() -> None:
    for name, column in INDEXES:
        op.create_index(name, "ci_fixes", [column])


def upgrade() -> None:
    _drop_indexes()
    with op.batch_alter_table("ci_fixes") as batch:
        batch.add_column(sa.Column("failing", JSONType, nullable=True))
    bind = op.get_bind()
    for row_id, joined in bind.execute(sa.select(ci_fixes.c.id, ci_fixes.c.checks)).all():
        failing = [{"name": name, "conclusion": ""} for name in (joined or "").split(", ") if name]
        bind.execute(ci_fixes.update().where(ci_fixes.c.id == row_id).values(failing=failing))
    with op.batch_alter_table("ci_fixes") as batch:
        batch.alter_column("failing", existing_type=JSONType, nullable=False)
        batch.drop_column("checks")
    _create_indexes()


def downgrade() -> None:
    _drop_indexes()
    with op.batch_alter_table("ci_fixes") as batch:
        batch.add_column(sa.Column("checks", sa.Text, nullable=True))
    bind = op.get_bind()
    for row_id, failing in bind.execute(sa.select(ci_fixes.c.id, ci_fixes.c.failing)).all():
        joined = ", ".join(check["name"] for check in failing or [])
        bind.execute(ci_fixes.update().where(ci_fixes.c.id == row_id).values(checks=joined))
    with op.batch_alter_table("ci_fixes") as batch:
        batch.alter_column("checks", existing_type=sa.Text, nullable=False)
        batch.drop_column("failing")
    _create_indexes()
