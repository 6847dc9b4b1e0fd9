"""webhook_deliveries.email: the invite's address when the event was written, so a delivery
built after a correction (Corrigir e reenviar) still names the address its event was about

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (no table rebuild); rows written before it read the invite's address.
    op.add_column("webhook_deliveries", sa.Column("email", sa.String(length=254), nullable=True))


def downgrade() -> None:
    # SQLite (3.35+) drops a plain column in place too: a batch rebuild would reflect the
    # tables it references and drop ix_invites_sender_email (see 0014).
    op.drop_column("webhook_deliveries", "email")
