"""What on-call does by hand: look at the stuck and failed invites, and send them again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from app.invites import transitions
from app.invites.records import Invite, record_from
from app.invites.status import Status
from app.invites.transitions.again import BulkResend
from app.live.wakeups import Announcer
from app.sending.queue import Publisher
from app.storage.database import Database
from app.storage.tables import invites

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReasonGroup:
    """Invites now in ``falhou`` that share one reason."""

    reason: str
    count: int
    latest: datetime


async def failed_by_reason(db: Database, limit: int = 50) -> list[ReasonGroup]:
    """Current ``falhou`` invites grouped by their reason, biggest group first."""
    query = (
        select(invites.c.error, func.count(), func.max(invites.c.updated_at))
        .where(invites.c.status == Status.FALHOU.value)
        .group_by(invites.c.error)
        .order_by(func.count().desc(), func.max(invites.c.updated_at).desc())
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return [ReasonGroup(error or "", count, latest) for error, count, latest in rows]


async def uncertain_invites(db: Database, limit: int = 100) -> list[Invite]:
    """``incerto`` invites, most recent first: a person has to decide whether to resend."""
    query = (
        select(invites)
        .where(invites.c.status == Status.INCERTO.value)
        .order_by(invites.c.updated_at.desc())
        .limit(limit)
    )
    async with db.read() as conn:
        rows = (await conn.execute(query)).all()
    return [record_from(Invite, row) for row in rows]


async def retry_in_bulk(
    db: Database,
    publisher: Publisher,
    announcer: Announcer,
    status: Status,
    *,
    reason: str | None = None,
    reason_contains: str | None = None,
) -> BulkResend:
    """Send again every invite in ``status`` with that reason: through the state machine, then
    published and announced. An invitation whose sender has another one on its way to the
    address stays as it is, counted in ``skipped``."""
    done = await transitions.request_resend_many(
        db, status, reason=reason, reason_contains=reason_contains
    )
    await publisher.publish_or_leave(done.changes)
    await announcer.announce_all(done.changes)
    log.info(
        "bulk retry",
        extra={
            "status": status.value,
            "reason": reason or reason_contains,
            "count": len(done.changes),
            "skipped": done.skipped,
        },
    )
    return done


def skipped_text(count: int) -> str:
    """What the operator reads about the rows a bulk retry left out (pt-BR): without it, "0
    convites voltaram" would read as if nothing had matched."""
    if count == 1:
        return (
            "1 convite ficou de fora: o remetente já tem outro convite a caminho do mesmo endereço."
        )
    return (
        f"{count} convites ficaram de fora: o remetente já tem outro convite a caminho "
        "do mesmo endereço."
    )
