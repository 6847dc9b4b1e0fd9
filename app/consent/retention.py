"""Retention: an invite that ended longer ago than ``RETENTION_DAYS`` is deleted, with its
events, links, bounces, outbox rows and webhook deliveries (LGPD: personal data kept no longer
than its purpose).

"Ended" means nothing will move the row again by itself: an invitation that was answered,
expired, cancelled, failed or bounced (the sender may still send one of those again, within the
retention period), and a sign-in or erasure confirmation mail once it left or failed (its link
lives minutes or hours). Its last change (``updated_at``) is when it ended.

The same job deletes the API's kept ``Idempotency-Key`` answers older than their own period
(``app.api.idempotency.KEEP``): a claim prunes only its own API key's, and a key that is never
used again would keep its answers, and the addresses in them, for ever.

An hourly arq cron of the worker runs it (``app.sending.worker``), for at most a minute: arq
keeps every job's in-progress lock for its longest function timeout, so a long cron would hold
the send jobs of a killed worker that long; what one run leaves, the next continues. It deletes
in chunks, one short transaction each, so the web's writers wait at most one chunk; it counts
what it deleted (``convites_retention_deleted``) and logs one line.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection, and_, delete, or_, select

from app.api import idempotency
from app.consent.removal import delete_invites
from app.invites.records import INVITE
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import bounces, idempotency_keys, invites

log = logging.getLogger(__name__)

#: Invitations nothing moves again by itself.
ENDED = (
    Status.ACEITO,
    Status.RECUSADO,
    Status.EXPIRADO,
    Status.CANCELADO,
    Status.FALHOU,
    Status.DEVOLVIDO,
)
#: A mail of another kind (sign-in, erasure confirmation) is over once it left or failed.
MAIL_IN_FLIGHT = (Status.PENDENTE, Status.ENVIANDO)
#: Invites deleted per transaction.
CHUNK = 500


def _ended_before(cutoff: datetime) -> ColumnElement[bool]:
    invitation_ended = and_(
        invites.c.kind == INVITE, invites.c.status.in_([status.value for status in ENDED])
    )
    mail_done = and_(
        invites.c.kind != INVITE,
        invites.c.status.not_in([status.value for status in MAIL_IN_FLIGHT]),
    )
    return and_(or_(invitation_ended, mail_done), invites.c.updated_at < cutoff)


def _purge_chunk(conn: Connection, cutoff: datetime, chunk: int) -> tuple[int, Counter[str]]:
    # FOR UPDATE (PostgreSQL): a resend of one of these rows waits for this transaction and
    # then finds it gone, instead of bringing back a row whose events are being deleted.
    query = (
        select(invites.c.id)
        .where(_ended_before(cutoff))
        .order_by(invites.c.id)
        .limit(chunk)
        .with_for_update()
    )
    ids = list(conn.execute(query).scalars())
    return len(ids), delete_invites(conn, ids)


def _purge_unmatched_bounces(conn: Connection, cutoff: datetime, chunk: int) -> int:
    """Bounces that named no invite of ours also hold addresses: the same period applies."""
    old = (
        select(bounces.c.id)
        .where(bounces.c.invite_id.is_(None), bounces.c.received_at < cutoff)
        .limit(chunk)
        .scalar_subquery()
    )
    return int(conn.execute(delete(bounces).where(bounces.c.id.in_(old))).rowcount)


def _purge_kept_answers(conn: Connection, now: datetime, chunk: int) -> int:
    old = (
        select(idempotency_keys.c.id)
        .where(idempotency_keys.c.created_at < idempotency.expired_before(now))
        .limit(chunk)
        .scalar_subquery()
    )
    deleted = conn.execute(delete(idempotency_keys).where(idempotency_keys.c.id.in_(old)))
    return int(deleted.rowcount)


async def purge(db: Database, now: datetime, retention_days: int) -> Counter[str]:
    """Delete what ended more than ``retention_days`` before ``now``, and kept API answers
    older than theirs; rows deleted per table."""
    cutoff = now - timedelta(days=retention_days)
    removed: Counter[str] = Counter()
    while True:
        async with db.write() as conn:
            found, deleted = await conn.run_sync(_purge_chunk, cutoff, CHUNK)
        removed += deleted
        if found < CHUNK:
            break
    while True:
        async with db.write() as conn:
            deleted_bounces = await conn.run_sync(_purge_unmatched_bounces, cutoff, CHUNK)
        removed += Counter(bounces=deleted_bounces)
        if deleted_bounces < CHUNK:
            break
    while True:
        async with db.write() as conn:
            deleted_answers = await conn.run_sync(_purge_kept_answers, now, CHUNK)
        removed += Counter(idempotency_keys=deleted_answers)
        if deleted_answers < CHUNK:
            break
    log.info(
        "retention purge",
        extra={"retention_days": retention_days, **{f"deleted_{k}": v for k, v in removed.items()}},
    )
    return removed
