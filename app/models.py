"""Tables: invites, their append-only event history, the outbox of jobs to enqueue, controls.

SQLAlchemy Core, not the ORM: every write is one explicit statement, and the transitions in
``app.invites`` are conditional UPDATEs whose row counts mean something.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)

metadata = MetaData()

# SQLite autoincrement wants INTEGER; PostgreSQL gets BIGINT.
Id = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, on SQLite (which drops the zone) and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime; use datetime.now(UTC)")
        return (
            value.astimezone(UTC)
            if dialect.name != "sqlite"
            else value.astimezone(UTC).replace(tzinfo=None)
        )

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


invites = Table(
    "invites",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("public_id", String(32), nullable=False, unique=True),
    Column("sender_id", String(64), nullable=False),
    Column("email", String(254), nullable=False),
    Column("name", String(200)),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("attempt", Integer, nullable=False),
    # Where the current round of automatic retries began: a resend gets a fresh budget.
    Column("round_first_attempt", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime),
    Column("next_attempt_at", UTCDateTime),
    Column("lease_expires_at", UTCDateTime),
    Column("correlation_id", String(64), nullable=False),
    Index("ix_invites_sender_id", "sender_id", "id"),
    Index("ix_invites_status_next_attempt", "status", "next_attempt_at"),
)

invite_events = Table(
    "invite_events",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("sender_id", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("error", Text),
    Column("next_attempt_at", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    # On falhou/incerto events: transient_exhausted | permanent | uncertain (app.status).
    Column("failure_class", String(24)),
    Index("ix_invite_events_sender_id", "sender_id", "id"),
    Index("ix_invite_events_invite_id", "invite_id", "id"),
    # Health and metrics count events by status and look at the last hour of failures.
    Index("ix_invite_events_status_created_at", "status", "created_at"),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("invite_id", Id, ForeignKey("invites.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("available_at", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("published_at", UTCDateTime),
    Column("job_id", String(96)),
    Index(
        "ix_outbox_unpublished",
        "id",
        sqlite_where=Column("published_at").is_(None),
        postgresql_where=Column("published_at").is_(None),
    ),
    Index("ix_outbox_invite_id", "invite_id", "id"),
)

# Switches the team sets on purpose (``app.pause``): one row per switch, in the database so it
# survives any restart of Redis.
controls = Table(
    "controls",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
