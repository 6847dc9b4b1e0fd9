"""webhook_deliveries: an index on invite_id, so deleting an invite's deliveries (retention,
erasure) finds them without reading every delivery

Revision ID: 0011
Revises: 0015
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_webhook_deliveries_invite_id", "webhook_deliveries", ["invite_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_invite_id", table_name="webhook_deliveries")
