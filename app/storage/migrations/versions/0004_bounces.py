"""bounces: every delivery status notification received

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "bounces",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("dedup_key", sa.String(length=64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("envelope_recipient", sa.String(length=320), nullable=False),
        sa.Column("public_id", sa.String(length=32), nullable=True),
        sa.Column("invite_id", Id, sa.ForeignKey("invites.id"), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("status_code", sa.String(length=16), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("reporting_host", sa.String(length=255), nullable=True),
        sa.Column("diagnostic", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.UniqueConstraint("dedup_key"),
    )
    op.create_index("ix_bounces_invite_id", "bounces", ["invite_id", "id"])
    op.create_index("ix_bounces_kind_outcome", "bounces", ["kind", "outcome"])


def downgrade() -> None:
    op.drop_index("ix_bounces_kind_outcome", table_name="bounces")
    op.drop_index("ix_bounces_invite_id", table_name="bounces")
    op.drop_table("bounces")
