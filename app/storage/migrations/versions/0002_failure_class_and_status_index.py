"""failure class on events, index for health and metrics

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EXHAUSTED_PREFIX = "Não foi possível enviar depois de "


def upgrade() -> None:
    with op.batch_alter_table("invite_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("failure_class", sa.String(length=24), nullable=True))
        batch_op.create_index(
            "ix_invite_events_status_created_at", ["status", "created_at"], unique=False
        )
    # Classify the failures recorded before this column existed, by the worker's wording.
    events = sa.table(
        "invite_events",
        sa.column("status", sa.String),
        sa.column("error", sa.Text),
        sa.column("failure_class", sa.String),
    )
    op.execute(
        events.update().where(events.c.status == "incerto").values(failure_class="uncertain")
    )
    op.execute(
        events.update()
        .where(events.c.status == "falhou", events.c.error.startswith(EXHAUSTED_PREFIX))
        .values(failure_class="transient_exhausted")
    )
    op.execute(
        events.update()
        .where(events.c.status == "falhou", events.c.failure_class.is_(None))
        .values(failure_class="permanent")
    )


def downgrade() -> None:
    with op.batch_alter_table("invite_events", schema=None) as batch_op:
        batch_op.drop_index("ix_invite_events_status_created_at")
        batch_op.drop_column("failure_class")
