"""What the pages, ``/operacao`` and ``/metrics`` read about bounces. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from app.db import Database
from app.models import bounces, invites
from app.records import Invite, record_from
from app.status import Status


@dataclass(frozen=True)
class Bounce:
    """One row of ``bounces`` (without the raw message)."""

    id: int
    received_at: datetime
    envelope_recipient: str
    public_id: str | None
    invite_id: int | None
    kind: str
    outcome: str
    status_code: str | None
    reason: str | None
    reporting_host: str | None
    diagnostic: str | None
    attempt: int | None
    problem: str | None


_COLUMNS = [bounces.c[name] for name in Bounce.__dataclass_fields__]


async def bounces_of(db: Database, invite_id: int) -> list[Bounce]:
    """Every bounce received for one invite, oldest first (its history keeps them all)."""
    async with db.read() as conn:
        rows = await conn.execute(
            select(*_COLUMNS).where(bounces.c.invite_id == invite_id).order_by(bounces.c.id)
        )
        return [record_from(Bounce, row) for row in rows.all()]


async def raw_bounce(db: Database, bounce_id: int) -> bytes | None:
    """The message as it was received (an operator looks at an unreadable one)."""
    async with db.read() as conn:
        raw = (await conn.execute(select(bounces.c.raw).where(bounces.c.id == bounce_id))).scalar()
    return bytes(raw) if raw is not None else None


async def bounce_counts(db: Database) -> dict[tuple[str, str], int]:
    """Bounces kept, by (kind, outcome): the ``convites_bounces_total`` counter."""
    async with db.read() as conn:
        rows = await conn.execute(
            select(bounces.c.kind, bounces.c.outcome, func.count()).group_by(
                bounces.c.kind, bounces.c.outcome
            )
        )
        return {(kind, outcome): int(count) for kind, outcome, count in rows.all()}


@dataclass(frozen=True)
class BouncedGroup:
    reason: str
    count: int
    invites: list[Invite]


async def bounced_by_reason(db: Database, per_reason: int = 20) -> list[BouncedGroup]:
    """The ``devolvido`` invites now, grouped by reason, largest group first."""
    async with db.read() as conn:
        rows = await conn.execute(
            select(invites)
            .where(invites.c.status == Status.DEVOLVIDO.value)
            .order_by(invites.c.updated_at.desc())
            .limit(1000)
        )
        found = [record_from(Invite, row) for row in rows.all()]
    groups: dict[str, list[Invite]] = {}
    for invite in found:
        groups.setdefault(invite.error or "", []).append(invite)
    ordered = sorted(groups.items(), key=lambda item: -len(item[1]))
    return [BouncedGroup(reason, len(items), items[:per_reason]) for reason, items in ordered]
