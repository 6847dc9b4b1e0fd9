"""sessions: a public id, the device and network they were opened from, their last use

Revision ID: 0009
Revises: 0008
"""

import secrets
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("public_id", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("user_agent", sa.String(length=300), nullable=True))
        batch.add_column(sa.Column("created_network", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("last_network", sa.String(length=64), nullable=True))
    # Sessions from before: a random id each (so each can be ended on its own), last used
    # when opened (nothing better is known).
    conn = op.get_bind()
    table = sa.table(
        "sessions",
        sa.column("id", sa.Integer()),
        sa.column("public_id", sa.String()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("last_used_at", sa.DateTime(timezone=True)),
    )
    for (session_id,) in conn.execute(sa.select(table.c.id)).all():
        conn.execute(
            table.update()
            .where(table.c.id == session_id)
            .values(public_id=secrets.token_urlsafe(16), last_used_at=table.c.created_at)
        )
    with op.batch_alter_table("sessions") as batch:
        batch.alter_column("public_id", existing_type=sa.String(length=32), nullable=False)
        batch.alter_column("last_used_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.create_unique_constraint("uq_sessions_public_id", ["public_id"])
        batch.create_index("ix_sessions_account_id", ["account_id"])


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_index("ix_sessions_account_id")
        batch.drop_constraint("uq_sessions_public_id", type_="unique")
        batch.drop_column("last_network")
        batch.drop_column("last_used_at")
        batch.drop_column("created_network")
        batch.drop_column("user_agent")
        batch.drop_column("public_id")
