"""ix_invites_sender_email on lower(email): a sender's duplicate invitation is the same mailbox
however its local part was typed, as the per-address limits and a batch's review already count

Revision ID: 0014
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# SQLite's reflection skips an index on an expression: a later ``batch_alter_table`` that
# rebuilds ``invites`` would drop this one without a word, so such a migration recreates it.


def upgrade() -> None:
    op.drop_index("ix_invites_sender_email", table_name="invites")
    op.create_index("ix_invites_sender_email", "invites", ["sender_id", sa.text("lower(email)")])


def downgrade() -> None:
    op.drop_index("ix_invites_sender_email", table_name="invites")
    op.create_index("ix_invites_sender_email", "invites", ["sender_id", "email"])
