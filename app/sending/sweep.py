"""The reconciliation sweep: what no request and no job will do on its own.

It releases scheduled invites whose moment has come, publishes outbox rows whose fast path
failed, turns expired leases ``incerto`` (an invitation's, and a reminder's), re-enqueues
``pendente`` rows whose job Redis lost, expires unanswered invites, and puts due webhook
deliveries on the queue (``app.webhooks.deliver``). An arq cron of the worker, and
``python -m app reconcile``; it needs nothing of arq's job context.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from arq.connections import ArqRedis
from sqlalchemy import func, or_, select

from app.clock import utcnow
from app.invites import transitions
from app.invites.records import Invite, OutboxEntry, record_from
from app.invites.status import Status
from app.invites.transitions import reminders
from app.invites.transitions.core import insert_ids
from app.live.wakeups import Announcer
from app.sending.outbox import outbox_values
from app.sending.queue import Publisher, job_is_live, relay_outbox
from app.storage.database import Database
from app.storage.tables import invites, outbox
from app.webhooks.deliver import publish_due

log = logging.getLogger(__name__)

LEASE_EXPIRED_REASON = (
    "O envio foi interrompido no meio e não conseguimos confirmar se o e-mail saiu."
)
#: A reminder cut mid-message, or whose worker died with it claimed (``reminder_status``
#: ``enviando`` past the sending lease).
REMINDER_CUT_SHORT = (
    "O envio foi interrompido no meio e não conseguimos confirmar se o lembrete saiu."
)
#: A ``pendente`` row due longer ago than this, with no live job, lost its job.
PENDING_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Sweep:
    """What one pass did."""

    published: int
    uncertain: int
    requeued: int
    expired: int = 0
    webhooks: int = 0  # webhook deliveries put on the queue
    released: int = 0  # scheduled invites released to pendente
    reminders_uncertain: int = 0  # reminders whose claim outlived the sending lease

    def any(self) -> bool:
        return any(vars(self).values())


async def overdue_pending(
    db: Database, due_before: datetime, limit: int = 500
) -> list[tuple[Invite, str | None]]:
    """``pendente`` rows due before ``due_before``, each with its last published job id (to ask
    Redis about); rows whose newest outbox entry is unpublished are left to the relay."""
    # Each row's newest outbox entry, looked up on ix_outbox_invite_id (not a GROUP BY of the
    # whole outbox, every sweep: it only grows).
    entries = outbox.alias("entries")
    latest = (
        select(func.max(entries.c.id))
        .where(entries.c.invite_id == invites.c.id)
        .correlate(invites)
        .scalar_subquery()
    )
    query = (
        select(invites, outbox.c.job_id)
        .select_from(invites.outerjoin(outbox, outbox.c.id == latest))
        .where(
            invites.c.status == Status.PENDENTE.value,
            invites.c.next_attempt_at < due_before,
            or_(outbox.c.id.is_(None), outbox.c.published_at.is_not(None)),
        )
        .order_by(invites.c.id)
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return [(record_from(Invite, row), row._mapping["job_id"]) for row in rows]


async def requeue(db: Database, publisher: Publisher, lost: list[Invite]) -> None:
    """A new outbox row and job for each ``pendente`` invite whose job was lost."""
    async with db.write() as conn:
        now = utcnow()
        rows = [outbox_values(invite, now) for invite in lost]
        outbox_ids = await conn.run_sync(insert_ids, outbox, rows)
    for invite, outbox_id in zip(lost, outbox_ids, strict=True):
        await publisher.publish_entry(
            OutboxEntry(
                id=outbox_id,
                invite_id=invite.id,
                public_id=invite.public_id,
                attempt=invite.attempt,
                available_at=invite.next_attempt_at or now,
                correlation_id=invite.correlation_id,
            )
        )


async def reconcile(
    db: Database,
    redis: ArqRedis,
    publisher: Publisher,
    announcer: Announcer,
    *,
    invite_ttl_seconds: float,
    sending_lease_seconds: float,
    webhook_requeue_seconds: float,
) -> Sweep:
    """One pass: release scheduled invites that are due, publish the outbox, expire leases (of
    invitations and reminders), re-enqueue pending rows whose job is gone, expire unanswered
    invites, put due webhook deliveries on the queue."""
    # Released first: their jobs are enqueued at once, and the relay below covers an outage.
    released = await transitions.release_due(db)
    await asyncio.gather(publisher.publish_or_leave(released), announcer.announce_all(released))
    published = await relay_outbox(db, publisher)
    expired = await transitions.expire_leases(db, LEASE_EXPIRED_REASON)
    await announcer.announce_all(expired)
    # A reminder still ``enviando`` after its worker's lease may have left: ambiguous, so
    # ``incerto`` and never re-sent on its own (its claim keeps the pass from claiming it again).
    reminders_expired = await reminders.expire_claims(db, sending_lease_seconds, REMINDER_CUT_SHORT)
    await announcer.announce_all(reminders_expired)
    due_before = utcnow() - timedelta(seconds=PENDING_GRACE_SECONDS)
    lost = [
        invite
        for invite, job_id in await overdue_pending(db, due_before)
        if job_id is None or not await job_is_live(redis, job_id)
    ]
    await requeue(db, publisher, lost)
    unanswered = await transitions.expire_unanswered(db, invite_ttl_seconds)
    await announcer.announce_all(unanswered)
    deliveries = await publish_due(db, redis, webhook_requeue_seconds)
    sweep = Sweep(
        published,
        len(expired),
        len(lost),
        len(unanswered),
        deliveries,
        len(released),
        len(reminders_expired),
    )
    if sweep.any():
        log.info("reconciled", extra=vars(sweep))
    return sweep
