"""Scheduled invites: the sender's new moment, and the sweep's release at that moment.

agendado → agendado (the sender reschedules, before its time)
agendado → pendente (the sweep, once ``send_at`` has come: the row, its event and its outbox row)
agendado → cancelado, with the reason (its address joined the suppression list meanwhile)
cancelado → agendado (that entry was lifted before the moment: the opt-out taken back)
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.clock import utcnow
from app.invites.records import INVITE, Change
from app.invites.status import Status
from app.invites.transitions.core import transition, transition_all
from app.storage.database import Database
from app.storage.tables import invites


async def reschedule(
    db: Database, sender_id: str, public_id: str, send_at: datetime
) -> Change | None:
    """``agendado → agendado`` at ``send_at`` (checked by the caller: future, within bounds);
    ``None`` when it was released, cancelled or is someone else's."""
    return await transition(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.kind == INVITE,
            invites.c.status == Status.AGENDADO.value,
        ],
        {"send_at": send_at},
    )


async def release_due(db: Database, limit: int = 500) -> list[Change]:
    """Every ``agendado`` invite whose moment has come becomes ``pendente``, due now, with an
    outbox row: from there it goes like any other (the pause and the hourly budget apply at the
    claim). The UPDATE is conditional on ``agendado``, so two workers' sweeps, or a cron run
    twice, release a row once; the caller publishes what comes back."""
    # An address suppressed meanwhile had its scheduled invitations called off then
    # (``call_off_for``); the worker's check after its claim (``app.sending.attempt``) still
    # stands behind that, as for every send.
    now = utcnow()
    due = (
        select(invites.c.id)
        .where(invites.c.status == Status.AGENDADO.value, invites.c.send_at <= now)
        .order_by(invites.c.send_at)
        .limit(limit)
    )
    async with db.write() as conn:
        return await conn.run_sync(
            transition_all,
            # The subquery's rows were picked from the statement's snapshot; on PostgreSQL
            # a reschedule that commits while this waits for a row's lock is only seen by the
            # conditions on the row itself, so the moment is checked again here.
            [
                invites.c.id.in_(due),
                invites.c.status == Status.AGENDADO.value,
                invites.c.send_at <= now,
            ],
            {"status": Status.PENDENTE.value, "next_attempt_at": now, "updated_at": now},
            enqueue=True,
        )


async def call_off_for(conn: AsyncConnection, email: str, reason: str) -> list[Change]:
    """``agendado → cancelado`` with ``reason``: every scheduled invitation to ``email``, any
    sender's, in the caller's transaction (the suppression that explains it). At its moment the
    worker would refuse it; until then its row would promise a send."""
    return await conn.run_sync(
        transition_all,
        [
            invites.c.kind == INVITE,
            invites.c.status == Status.AGENDADO.value,
            func.lower(invites.c.email) == email.strip().lower(),
        ],
        {"status": Status.CANCELADO.value, "error": reason, "next_attempt_at": None},
    )


async def restore_called_off(conn: AsyncConnection, email: str, reason: str) -> list[Change]:
    """``cancelado → agendado``: the invitations ``call_off_for`` cancelled with ``reason``,
    whose moment is still ahead, when the address leaves the list (its owner took the opt-out
    back, or an operator lifted a wrong entry): they go at their moment, as if never touched.
    One cancelled at its claim (its moment had come) or by its sender is not this."""
    return await conn.run_sync(
        transition_all,
        [
            invites.c.kind == INVITE,
            invites.c.status == Status.CANCELADO.value,
            invites.c.error == reason,
            invites.c.sent_at.is_(None),
            invites.c.send_at > utcnow(),
            func.lower(invites.c.email) == email.strip().lower(),
        ],
        {"status": Status.AGENDADO.value, "error": None},
    )
