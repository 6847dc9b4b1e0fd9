"""The ``batches`` table: a whole batch written in one transaction, and what its page reads.

A batch's invites, their events and outbox rows are written by ``app.invites.transitions``'
``create_invites`` (the same four statements as any invite) inside the batch's own group
commit, after the ``batches`` row. The duplicate check runs first, in that transaction: if any
address is already on its way, nothing at all is written and the caller is told which.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection, func, insert, or_, select

from app.clock import utcnow
from app.invites import queries
from app.invites.records import Change, Invite, NewInvite, new_public_id, record_from
from app.invites.status import Status
from app.invites.transitions import create_invites
from app.invites.transitions.sending import hold_senders, on_their_way
from app.storage.database import Database
from app.storage.tables import batches, invite_events, invites


@dataclass(frozen=True)
class Batch:
    """One row of ``batches``."""

    id: int
    public_id: str
    sender_id: str
    size: int
    created_at: datetime


@dataclass(frozen=True)
class NewBatch:
    """What a send asks for: every invite of one batch (all of one sender)."""

    sender_id: str
    requests: tuple[NewInvite, ...]


@dataclass(frozen=True)
class Written:
    """A batch committed: its row and every invite's change (publish them)."""

    batch: Batch
    changes: list[Change]


@dataclass(frozen=True)
class Conflict:
    """Nothing written: these addresses already have an invite of this sender on its way."""

    existing: list[Invite]


class _BatchRaced(RuntimeError):
    """A duplicate appeared between the check and the insert: roll everything back."""


def _write_one(conn: Connection, batch: NewBatch) -> Written | Conflict:
    # The sender held before the check, so the check sees every invitation on its way.
    hold_senders(conn, [batch.sender_id])
    existing = list(on_their_way(conn, batch.requests).values())
    if existing:
        return Conflict(existing)
    now = utcnow()
    public_id = new_public_id()
    batch_id = (
        conn.execute(
            insert(batches).returning(batches.c.id),
            {
                "public_id": public_id,
                "sender_id": batch.sender_id,
                "size": len(batch.requests),
                "created_at": now,
            },
        )
    ).scalar_one()
    requests = [replace(request, batch_id=int(batch_id)) for request in batch.requests]
    results = create_invites(conn, requests)
    changes = [result for result in results if isinstance(result, Change)]
    if len(changes) != len(results):
        raise _BatchRaced("a duplicate appeared inside the batch's own transaction")
    row = Batch(int(batch_id), public_id, batch.sender_id, len(requests), now)
    return Written(row, changes)


async def write_batch(db: Database, batch: NewBatch) -> Written | Conflict:
    """Write the batch row and all its invites, events and outbox rows in one transaction, or
    nothing when any address is already on its way (``Conflict``). A transaction of its own,
    not the group commit: a group's single invitations hold their senders in one step
    (``sending.hold_senders``), which a batch's hold in the same transaction would split."""
    async with db.write() as conn:
        return await conn.run_sync(_write_one, batch)


async def get_batch(db: Database, sender_id: str, public_id: str) -> Batch | None:
    """The sender's batch, or ``None``: someone else's batch does not exist for them."""
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(batches).where(
                    batches.c.public_id == public_id, batches.c.sender_id == sender_id
                )
            )
        ).first()
    return record_from(Batch, row) if row else None


@dataclass(frozen=True)
class BatchRows:
    """A batch's invites (oldest first), each one's newest event id, and the stream cursor."""

    invites: list[Invite]
    event_ids: dict[int, int]
    cursor: int


async def batch_rows(db: Database, batch: Batch, status: Status | None = None) -> BatchRows:
    """The batch's invites (only those in ``status``, if given), read after the cursor."""
    query = select(invites).where(invites.c.batch_id == batch.id)
    if status is not None:
        query = query.where(invites.c.status == status.value)
    cursor = await queries.last_event_id(db, batch.sender_id)
    async with db.read() as conn:
        found = [
            record_from(Invite, row)
            for row in (await conn.execute(query.order_by(invites.c.id))).all()
        ]
        newest = (
            await conn.execute(
                select(invite_events.c.invite_id, func.max(invite_events.c.id))
                .join(invites, invites.c.id == invite_events.c.invite_id)
                .where(invites.c.batch_id == batch.id)
                .group_by(invite_events.c.invite_id)
            )
        ).all()
    return BatchRows(found, {int(i): int(e) for i, e in newest}, cursor)


async def status_counts(db: Database, batch_id: int) -> dict[Status, int]:
    """How many of the batch's invites are in each status now (one grouped read)."""
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(invites.c.status, func.count())
                .where(invites.c.batch_id == batch_id)
                .group_by(invites.c.status)
            )
        ).all()
    return {Status(status): int(count) for status, count in rows}


@dataclass(frozen=True)
class Tally:
    """What a batch's page summarises: its invites per status, their reminders per state
    (``pedido`` for one asked for and not yet claimed), and when its earliest scheduled
    invite goes."""

    counts: dict[Status, int]
    reminders: dict[str, int]
    send_at: datetime | None


async def tally(db: Database, batch_id: int) -> Tally:
    """The batch's ``Tally`` (grouped reads, however many rows)."""
    counts = await status_counts(db, batch_id)
    asked = invites.c.reminder_requested_at.is_not(None)
    async with db.read() as conn:
        rows = (
            await conn.execute(
                select(invites.c.reminder_status, asked, func.count())
                .where(
                    invites.c.batch_id == batch_id,
                    or_(invites.c.reminder_status.is_not(None), asked),
                )
                .group_by(invites.c.reminder_status, asked)
            )
        ).all()
        send_at = None
        if counts.get(Status.AGENDADO):
            send_at = (
                await conn.execute(
                    select(func.min(invites.c.send_at)).where(
                        invites.c.batch_id == batch_id,
                        invites.c.status == Status.AGENDADO.value,
                    )
                )
            ).scalar_one()
    reminders: dict[str, int] = {}
    for state, was_asked, count in rows:
        # Asked again after an earlier reminder: "pedido" is what is happening now.
        key = "pedido" if was_asked else str(state)
        reminders[key] = reminders.get(key, 0) + int(count)
    return Tally(counts, reminders, send_at)


#: "Meus lotes" shows this many, newest first.
LISTED_BATCHES = 50


async def sender_batches(
    db: Database, sender_id: str, limit: int = LISTED_BATCHES
) -> list[tuple[Batch, dict[Status, int]]]:
    """The sender's newest batches, each with how many of its invites are in each status (two
    reads, however many batches)."""
    async with db.read() as conn:
        found = [
            record_from(Batch, row)
            for row in (
                await conn.execute(
                    select(batches)
                    .where(batches.c.sender_id == sender_id)
                    .order_by(batches.c.id.desc())
                    .limit(limit)
                )
            ).all()
        ]
        if not found:
            return []
        rows = (
            await conn.execute(
                select(invites.c.batch_id, invites.c.status, func.count())
                .where(invites.c.batch_id.in_([batch.id for batch in found]))
                .group_by(invites.c.batch_id, invites.c.status)
            )
        ).all()
    counts: dict[int, dict[Status, int]] = {batch.id: {} for batch in found}
    for batch_id, status, count in rows:
        counts[int(batch_id)][Status(status)] = int(count)
    return [(batch, counts[batch.id]) for batch in found]
