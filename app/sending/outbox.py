"""The outbox table: each row asks for one attempt's arq job, written with the transition.

``Publisher`` enqueues each row right after the commit and marks it published; the relay
publishes whatever that fast path missed (``app.sending.queue``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from app.clock import utcnow
from app.invites.records import Change, Invite, OutboxEntry, record_from
from app.storage.database import Database
from app.storage.tables import invites, outbox


def outbox_values(invite: Invite, now: datetime) -> dict[str, Any]:
    """The outbox row for ``invite``'s current attempt, due when the attempt is."""
    return {
        "invite_id": invite.id,
        "attempt": invite.attempt,
        "available_at": invite.next_attempt_at or now,
        "created_at": now,
    }


def outbox_entry_of(change: Change) -> OutboxEntry | None:
    """The outbox row a transition just wrote, from what it returned (no re-read)."""
    if change.outbox_id is None:
        return None
    invite = change.invite
    return OutboxEntry(
        id=change.outbox_id,
        invite_id=invite.id,
        public_id=invite.public_id,
        attempt=invite.attempt,
        available_at=invite.next_attempt_at or invite.updated_at,
        correlation_id=invite.correlation_id,
    )


async def unpublished_outbox(
    db: Database, created_before: datetime, limit: int = 500
) -> list[OutboxEntry]:
    """Outbox rows no one has enqueued yet (the request's fast path may have failed)."""
    query = (
        select(
            outbox.c.id,
            outbox.c.invite_id,
            invites.c.public_id,
            outbox.c.attempt,
            outbox.c.available_at,
            invites.c.correlation_id,
        )
        .join(invites, invites.c.id == outbox.c.invite_id)
        .where(outbox.c.published_at.is_(None), outbox.c.created_at < created_before)
        .order_by(outbox.c.id)
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return [record_from(OutboxEntry, row._mapping) for row in rows]


async def mark_published(db: Database, outbox_id: int, job_id: str) -> None:
    """Record that the job for this outbox row is in the queue (group commit)."""
    await db.write_many(_mark_published, (outbox_id, job_id))


def _mark_published(conn: Connection, published: Sequence[tuple[int, str]]) -> list[None]:
    statement = (
        update(outbox)
        .where(outbox.c.id == bindparam("outbox_id"), outbox.c.published_at.is_(None))
        .values(published_at=utcnow(), job_id=bindparam("new_job_id"))
    )
    conn.execute(statement, [{"outbox_id": row, "new_job_id": job_id} for row, job_id in published])
    return [None] * len(published)
