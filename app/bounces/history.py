"""What the pages, ``/operacao`` and ``/metrics`` read about bounces. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from app.bounces.reasons import history_line
from app.invites.records import Invite, record_from
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import bounces, invites


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


def bounce_json(bounce: Bounce) -> dict[str, Any]:
    """A kept bounce in an invite's JSON history (pt-BR keys, like the rest of the API)."""
    return {
        "id": bounce.id,
        "em": bounce.received_at.isoformat(),
        "classe": bounce.kind,
        "efeito": bounce.outcome,
        "codigo": bounce.status_code,
        "motivo": bounce.reason,
        "informado_por": bounce.reporting_host,
        "tentativa": bounce.attempt,
        "descricao": history_line(bounce.kind, bounce.outcome, bounce.reason),
    }


async def bounces_of(db: Database, invite_id: int) -> list[Bounce]:
    """Every bounce received for one invite, oldest first (its history keeps them all)."""
    async with db.read() as conn:
        rows = await conn.execute(
            select(*_COLUMNS).where(bounces.c.invite_id == invite_id).order_by(bounces.c.id)
        )
        return [record_from(Bounce, row) for row in rows.all()]


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
