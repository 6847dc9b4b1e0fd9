"""Asking again: the person (or an operator) sends a stopped invite again, with a fresh round.

falhou | incerto → pendente (the person, or an operator, asks again)
devolvido → pendente (the person corrected the address and asks again)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.clock import utcnow
from app.db import Database
from app.models import invites
from app.records import Change
from app.status import CORRECTABLE, RESENDABLE, Status
from app.transitions.core import transition, transition_all


def _resend_values(now: datetime) -> dict[str, Any]:
    return {
        "status": Status.PENDENTE.value,
        "error": None,
        "attempt": invites.c.attempt + 1,
        "round_first_attempt": invites.c.attempt + 1,
        "next_attempt_at": now,
        "updated_at": now,
    }


async def request_resend(db: Database, sender_id: str, public_id: str) -> Change | None:
    """``falhou | incerto → pendente``, a new attempt with a fresh retry budget.

    ``None`` when the invite is in any other state (a double click's second request lands here).
    """
    return await transition(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.status.in_([s.value for s in RESENDABLE]),
        ],
        _resend_values(utcnow()),
        enqueue=True,
    )


async def request_resend_many(
    db: Database,
    status: Status,
    *,
    reason: str | None = None,
    reason_contains: str | None = None,
    limit: int = 1000,
) -> list[Change]:
    """An operator's bulk retry: ``status → pendente`` for every invite in ``status`` (one of
    ``falhou``/``incerto``) whose reason is ``reason`` (exact) or contains ``reason_contains``.

    One conditional UPDATE (still in ``status``, still with that reason) over the oldest
    ``limit`` such rows; each row it wins gets its own event and outbox row, like
    ``request_resend``. The caller publishes the outbox rows.
    """
    if status not in RESENDABLE:
        raise ValueError(f"only {', '.join(RESENDABLE)} invites can be sent again, not {status}")
    where: list[Any] = [invites.c.status == status.value]
    if reason is not None:
        where.append(invites.c.error == reason)
    if reason_contains is not None:
        where.append(invites.c.error.contains(reason_contains, autoescape=True))
    oldest = select(invites.c.id).where(*where).order_by(invites.c.id).limit(limit)
    async with db.write() as conn:
        changes = await transition_all(
            conn,
            [invites.c.id.in_(oldest), *where],
            _resend_values(utcnow()),
            enqueue=True,
        )
    return sorted(changes, key=lambda change: change.invite.id)


async def correct_and_resend(
    db: Database, sender_id: str, public_id: str, email: str
) -> Change | None:
    """``devolvido → pendente`` with the address the person corrected: a new attempt, a fresh
    retry budget, its own outbox row. The bounce stays in the history.

    ``None`` when the invite is not (or no longer) ``devolvido``.
    """
    return await transition(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.status.in_([s.value for s in CORRECTABLE]),
        ],
        {**_resend_values(utcnow()), "email": email, "sent_at": None},
        enqueue=True,
    )
