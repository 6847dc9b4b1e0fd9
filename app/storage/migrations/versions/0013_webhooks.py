"""webhooks and webhook_deliveries: signed callbacks for every status change of an invite

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("public_id", sa.String(length=32), nullable=False),
        sa.Column("account_id", _ID, sa.ForeignKey("accounts.id"), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("secret", sa.String(length=100), nullable=False),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("disabled_at", _WHEN, nullable=True),
        sa.UniqueConstraint("public_id", name="uq_webhooks_public_id"),
    )
    op.create_index("ix_webhooks_account_id", "webhooks", ["account_id", "id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("public_id", sa.String(length=40), nullable=False),
        sa.Column("webhook_id", _ID, sa.ForeignKey("webhooks.id"), nullable=False),
        sa.Column("event_id", _ID, sa.ForeignKey("invite_events.id"), nullable=False),
        sa.Column("invite_id", _ID, sa.ForeignKey("invites.id"), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("available_at", _WHEN, nullable=False),
        sa.Column("queued_until", _WHEN, nullable=True),
        sa.Column("enqueues", sa.Integer(), nullable=False),
        sa.Column("leased_until", _WHEN, nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("snippet", sa.String(length=300), nullable=True),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("created_at", _WHEN, nullable=False),
        sa.Column("updated_at", _WHEN, nullable=False),
        sa.UniqueConstraint("public_id", name="uq_webhook_deliveries_public_id"),
    )
    op.create_index("ix_webhook_deliveries_webhook_id", "webhook_deliveries", ["webhook_id", "id"])
    # Deleting an invite's deliveries (retention, erasure) finds them without reading them all.
    op.create_index("ix_webhook_deliveries_invite_id", "webhook_deliveries", ["invite_id", "id"])
    pending = sa.text("state = 'pendente'")
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["available_at"],
        sqlite_where=pending,
        postgresql_where=pending,
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_invite_id", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_webhook_id", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhooks_account_id", table_name="webhooks")
    op.drop_table("webhooks")
