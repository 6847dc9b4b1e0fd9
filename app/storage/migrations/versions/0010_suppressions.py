"""suppressions: addresses nobody may invite (opted out, bounced for good, complained)

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "suppressions",
        sa.Column("address_hash", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=True),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.String(length=200), nullable=True),
        sa.PrimaryKeyConstraint("address_hash"),
    )
    op.create_index("ix_suppressions_created_at", "suppressions", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_suppressions_created_at", table_name="suppressions")
    op.drop_table("suppressions")
