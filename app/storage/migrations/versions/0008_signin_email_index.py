"""signin_tokens: found by address (a new sign-in link retires the address's live ones)

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Issuing a link marks the address's unused ones used: without this index, a scan of every
    # sign-in link ever issued, inside the write transaction.
    op.create_index("ix_signin_tokens_email", "signin_tokens", ["email"])


def downgrade() -> None:
    op.drop_index("ix_signin_tokens_email", table_name="signin_tokens")
