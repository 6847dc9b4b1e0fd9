"""invites, events and outbox

Revision ID: 0001
Revises:
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "invites",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("public_id", sa.String(length=32), nullable=False),
        sa.Column("sender_id", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("round_first_attempt", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("correlation_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("public_id"),
    )
    with op.batch_alter_table("invites", schema=None) as batch_op:
        batch_op.create_index("ix_invites_sender_id", ["sender_id", "id"], unique=False)
        batch_op.create_index(
            "ix_invites_status_next_attempt", ["status", "next_attempt_at"], unique=False
        )

    op.create_table(
        "invite_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "invite_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("sender_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["invite_id"],
            ["invites.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("invite_events", schema=None) as batch_op:
        batch_op.create_index("ix_invite_events_invite_id", ["invite_id", "id"], unique=False)
        batch_op.create_index("ix_invite_events_sender_id", ["sender_id", "id"], unique=False)

    op.create_table(
        "outbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "invite_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("available_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("job_id", sa.String(length=96), nullable=True),
        sa.ForeignKeyConstraint(
            ["invite_id"],
            ["invites.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index("ix_outbox_invite_id", ["invite_id", "id"], unique=False)
        batch_op.create_index(
            "ix_outbox_unpublished",
            ["id"],
            unique=False,
            sqlite_where=sa.text("published_at IS NULL"),
            postgresql_where=sa.text("published_at IS NULL"),
        )


def downgrade() -> None:

    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_outbox_unpublished",
            sqlite_where=sa.text("published_at IS NULL"),
            postgresql_where=sa.text("published_at IS NULL"),
        )
        batch_op.drop_index("ix_outbox_invite_id")

    op.drop_table("outbox")
    with op.batch_alter_table("invite_events", schema=None) as batch_op:
        batch_op.drop_index("ix_invite_events_sender_id")
        batch_op.drop_index("ix_invite_events_invite_id")

    op.drop_table("invite_events")
    with op.batch_alter_table("invites", schema=None) as batch_op:
        batch_op.drop_index("ix_invites_status_next_attempt")
        batch_op.drop_index("ix_invites_sender_id")

    op.drop_table("invites")
