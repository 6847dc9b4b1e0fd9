"""invites: send_at (a scheduled, ``agendado``, invite's moment) and the reminder's columns;
invite_events.reminder; invite_links.seed (a reminder carries the same link); the occasion

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("invites") as batch:
        batch.add_column(sa.Column("send_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_invites_status_send_at", ["status", "send_at"])
        batch.add_column(sa.Column("reminder_status", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("reminded_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(
            sa.Column("reminder_requested_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch.create_index("ix_invites_status_sent_at", ["status", "sent_at"])
        batch.add_column(sa.Column("occasion_title", sa.String(length=120), nullable=True))
        batch.add_column(sa.Column("occasion_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("occasion_place", sa.String(length=200), nullable=True))
    with op.batch_alter_table("invite_events") as batch:
        batch.add_column(sa.Column("reminder", sa.String(length=16), nullable=True))
    with op.batch_alter_table("invite_links") as batch:
        batch.add_column(sa.Column("seed", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invite_links") as batch:
        batch.drop_column("seed")
    with op.batch_alter_table("invite_events") as batch:
        batch.drop_column("reminder")
    with op.batch_alter_table("invites") as batch:
        batch.drop_column("occasion_place")
        batch.drop_column("occasion_at")
        batch.drop_column("occasion_title")
        batch.drop_index("ix_invites_status_sent_at")
        batch.drop_column("reminder_requested_at")
        batch.drop_column("reminded_at")
        batch.drop_column("reminder_status")
        batch.drop_index("ix_invites_status_send_at")
        batch.drop_column("send_at")
