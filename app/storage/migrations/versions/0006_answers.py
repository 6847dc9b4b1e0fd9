"""answers: the invitee's link (hash only, one live per invite) and the sender's message

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("invites") as batch:
        batch.add_column(sa.Column("message", sa.Text(), nullable=True))
    op.create_table(
        "invite_links",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("invite_id", Id, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replaced_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["invite_id"], ["invites.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash", name="uq_invite_links_token_hash"),
    )
    op.create_index("ix_invite_links_invite_id", "invite_links", ["invite_id", "id"])
    live = sa.text("replaced_at IS NULL")
    op.create_index(
        "uq_invite_links_live",
        "invite_links",
        ["invite_id"],
        unique=True,
        sqlite_where=live,
        postgresql_where=live,
    )


def downgrade() -> None:
    op.drop_index("uq_invite_links_live", table_name="invite_links")
    op.drop_index("ix_invite_links_invite_id", table_name="invite_links")
    op.drop_table("invite_links")
    with op.batch_alter_table("invites") as batch:
        batch.drop_column("message")
