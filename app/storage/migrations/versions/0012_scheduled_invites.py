"""invites: send_at, the moment a scheduled (``agendado``) invite is to go

Revision ID: 0012
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("invites") as batch:
        batch.add_column(sa.Column("send_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_invites_status_send_at", ["status", "send_at"])


def downgrade() -> None:
    with op.batch_alter_table("invites") as batch:
        batch.drop_index("ix_invites_status_send_at")
        batch.drop_column("send_at")
