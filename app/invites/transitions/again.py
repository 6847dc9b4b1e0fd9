"""Asking again: the person (or an operator) sends a stopped invite again, with a fresh round.

falhou | incerto | expirado | recusado | cancelado → pendente (the person asks again)
falhou | incerto → pendente (an operator's bulk retry)
devolvido → pendente (the person corrected the address and asks again)

Each re-send replaces the invite's live link in the same transaction: the old mail's link
answers 410 "substituído", and the new attempt's mail carries a new one; the old round's
reminder is forgotten, so the new round gets its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from app.clock import utcnow
from app.invites.links import replace_links
from app.invites.records import Change
from app.invites.status import CORRECTABLE, RESENDABLE, RETRYABLE_IN_BULK, Status
from app.invites.transitions.core import transition_all
from app.storage.database import Database
from app.storage.tables import invites


def _resend_values(now: datetime) -> dict[str, Any]:
    return {
        "status": Status.PENDENTE.value,
        "error": None,
        "attempt": invites.c.attempt + 1,
        "round_first_attempt": invites.c.attempt + 1,
        "next_attempt_at": now,
        "updated_at": now,
        # A new round starts with no reminder: the old round's would read as this one's, and
        # would keep this round from its own automatic reminder.
        "reminder_status": None,
        "reminded_at": None,
        "reminder_requested_at": None,
    }


def _resend_rows(conn: Connection, where: list[Any], values: dict[str, Any]) -> list[Change]:
    changes = transition_all(conn, where, values, enqueue=True)
    replace_links(conn, [change.invite.id for change in changes], utcnow())
    return changes


async def _resend(db: Database, where: list[Any], values: dict[str, Any]) -> list[Change]:
    """The conditional UPDATE back to ``pendente`` (with outbox rows) and the links replaced."""
    async with db.write() as conn:
        changes = await conn.run_sync(_resend_rows, where, values)
    return changes


async def request_resend(db: Database, sender_id: str, public_id: str) -> Change | None:
    """``falhou | incerto | expirado | recusado | cancelado → pendente``: a new attempt, a fresh
    retry budget and a new link; ``None`` from any other state (a double click's second)."""
    changes = await _resend(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.status.in_([s.value for s in RESENDABLE]),
        ],
        _resend_values(utcnow()),
    )
    return changes[0] if changes else None


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
    One conditional UPDATE over the oldest ``limit``; the caller publishes the outbox rows.
    """
    if status not in RETRYABLE_IN_BULK:
        raise ValueError(
            f"only {', '.join(RETRYABLE_IN_BULK)} invites can be sent again, not {status}"
        )
    where: list[Any] = [invites.c.status == status.value]
    if reason is not None:
        where.append(invites.c.error == reason)
    if reason_contains is not None:
        where.append(invites.c.error.contains(reason_contains, autoescape=True))
    oldest = select(invites.c.id).where(*where).order_by(invites.c.id).limit(limit)
    changes = await _resend(db, [invites.c.id.in_(oldest), *where], _resend_values(utcnow()))
    return sorted(changes, key=lambda change: change.invite.id)


async def correct_and_resend(
    db: Database, sender_id: str, public_id: str, email: str
) -> Change | None:
    """``devolvido → pendente`` with the address the person corrected: a new attempt, a fresh
    retry budget, its own outbox row; ``None`` unless still ``devolvido``."""
    changes = await _resend(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.status.in_([s.value for s in CORRECTABLE]),
        ],
        {**_resend_values(utcnow()), "email": email, "sent_at": None},
    )
    return changes[0] if changes else None
