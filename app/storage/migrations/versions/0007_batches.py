"""batches: many invites sent at once, and each invite's batch

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("public_id", sa.String(length=32), nullable=False),
        sa.Column("sender_id", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("public_id", name="uq_batches_public_id"),
    )
    op.create_index("ix_batches_sender_id", "batches", ["sender_id", "id"])
    with op.batch_alter_table("invites") as batch:
        batch.add_column(sa.Column("batch_id", Id, nullable=True))
        batch.create_foreign_key("fk_invites_batch_id", "batches", ["batch_id"], ["id"])
        batch.create_index("ix_invites_batch_id", ["batch_id", "id"])


def downgrade() -> None:
    with op.batch_alter_table("invites") as batch:
        batch.drop_index("ix_invites_batch_id")
        batch.drop_constraint("fk_invites_batch_id", type_="foreignkey")
        batch.drop_column("batch_id")
    op.drop_index("ix_batches_sender_id", table_name="batches")
    op.drop_table("batches")
