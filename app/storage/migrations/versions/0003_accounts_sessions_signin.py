"""accounts, server-side sessions, sign-in links; invites name their sender and their kind

Revision ID: 0003
Revises: 0002

Rows written before accounts existed (by anonymous senders) stay as they are: their
``sender_id`` is the random id their browser had, ``kind`` is ``convite`` and the sender's name
and address are empty.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("public_id", sa.String(length=32), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("public_id", name="uq_accounts_public_id"),
        sa.UniqueConstraint("email", name="uq_accounts_email"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("account_id", Id, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_sessions_token_hash"),
    )
    op.create_table(
        "signin_tokens",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("invite_id", Id, sa.ForeignKey("invites.id"), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("token_hash", name="uq_signin_tokens_token_hash"),
    )
    op.create_index("ix_signin_tokens_invite_id", "signin_tokens", ["invite_id"])
    with op.batch_alter_table("invites", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="convite")
        )
        batch_op.add_column(sa.Column("sender_name", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("sender_email", sa.String(length=254), nullable=True))
        batch_op.create_index("ix_invites_sender_email", ["sender_id", "email"], unique=False)
        batch_op.create_index("ix_invites_email_created_at", ["email", "created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("invites", schema=None) as batch_op:
        batch_op.drop_index("ix_invites_email_created_at")
        batch_op.drop_index("ix_invites_sender_email")
        batch_op.drop_column("sender_email")
        batch_op.drop_column("sender_name")
        batch_op.drop_column("kind")
    op.drop_index("ix_signin_tokens_invite_id", table_name="signin_tokens")
    op.drop_table("signin_tokens")
    op.drop_table("sessions")
    op.drop_table("accounts")
