"""The invitee's answer, the sender's cancel, and the sweep's expiry: the ends of an invite.

enviado | incerto | devolvido → aceito | recusado (the link, while live; a click proves arrival;
    either answer is final)
agendado | pendente | enviado | incerto | falhou | devolvido → cancelado (the sender; a claim or
    a release then loses)
enviado | incerto → expirado (the sweep, ``INVITE_TTL_SECONDS`` after its link was issued, or
    once its occasion has passed)
enviado | incerto | devolvido | recusado → recusado, with the reason (the invitee opted out
    of every invitation, or reported this one as spam)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import exists, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from app.accounts.sessions import token_hash
from app.clock import utcnow
from app.invites.records import INVITE, Change
from app.invites.status import ANSWERABLE, CANCELLABLE, EXPIRABLE, Status
from app.invites.transitions.core import transition, transition_all
from app.invites.transitions.reminders import ReminderStatus
from app.storage.database import Database
from app.storage.tables import invite_links, invites


def _through_live_link(token: str, ttl_seconds: float) -> Any:
    """The invite whose live, unexpired link this token is (a replaced link answers nothing)."""
    return invites.c.id.in_(
        select(invite_links.c.invite_id).where(
            invite_links.c.token_hash == token_hash(token),
            invite_links.c.replaced_at.is_(None),
            invite_links.c.created_at > utcnow() - timedelta(seconds=ttl_seconds),
        )
    )


async def accept(db: Database, token: str, ttl_seconds: float) -> Change | None:
    """``→ aceito`` through the invite's live link; ``None`` when it was already answered (or
    the link is replaced, expired, cancelled): of two clicks, one records the answer."""
    return await _answer(db, token, ttl_seconds, Status.ACEITO)


async def decline(db: Database, token: str, ttl_seconds: float) -> Change | None:
    """``→ recusado`` through the invite's live link; ``None`` when already answered."""
    return await _answer(db, token, ttl_seconds, Status.RECUSADO)


async def _answer(db: Database, token: str, ttl_seconds: float, answer: Status) -> Change | None:
    return await transition(
        db,
        [
            _through_live_link(token, ttl_seconds),
            invites.c.status.in_([s.value for s in ANSWERABLE]),
        ],
        {"status": answer.value, "error": None, "next_attempt_at": None},
    )


async def cancel(db: Database, sender_id: str, public_id: str) -> Change | None:
    """``→ cancelado`` by its sender, before any answer (a later claim loses: never sent);
    ``None`` when answered, sending right now (the invitation or its reminder), or already
    closed."""
    return await transition(
        db,
        [
            invites.c.public_id == public_id,
            invites.c.sender_id == sender_id,
            invites.c.kind == INVITE,
            invites.c.status.in_([s.value for s in CANCELLABLE]),
            # A reminder on its way cannot be called back: cancelling now would tell the
            # sender the link is dead while a mail carrying it is being handed over.
            invites.c.reminder_status.is_distinct_from(ReminderStatus.SENDING.value),
        ],
        {
            "status": Status.CANCELADO.value,
            "error": None,
            "next_attempt_at": None,
            "lease_expires_at": None,
        },
    )


async def expire_unanswered(db: Database, ttl_seconds: float, limit: int = 500) -> list[Change]:
    """Every ``enviado``/``incerto`` invitation whose live link was issued more than
    ``ttl_seconds`` ago, or whose occasion has passed, unanswered, becomes ``expirado``.
    Counted from the link, so a re-send gets a full period and a row without a link never
    expires; an answer that commits first wins.
    """
    horizon = utcnow() - timedelta(seconds=ttl_seconds)
    old_link = exists(
        select(invite_links.c.id).where(
            invite_links.c.invite_id == invites.c.id,
            invite_links.c.replaced_at.is_(None),
            invite_links.c.created_at < horizon,
        )
    )
    due = [
        invites.c.kind == INVITE,  # a sign-in mail has no answer to wait for
        invites.c.status.in_([s.value for s in EXPIRABLE]),
        # Its occasion already happened: an answer would mean nothing now.
        or_(old_link, invites.c.occasion_at <= utcnow()),
    ]
    oldest = select(invites.c.id).where(*due).order_by(invites.c.id).limit(limit)
    async with db.write() as conn:
        changes = await conn.run_sync(
            transition_all,
            [invites.c.id.in_(oldest), *due],
            {"status": Status.EXPIRADO.value, "error": None},
        )
    return sorted(changes, key=lambda change: change.invite.id)


async def mark_unwanted(conn: AsyncConnection, invite_id: int, reason: str) -> Change | None:
    """``enviado | incerto | devolvido | recusado → recusado`` with ``reason``: the invitee does
    not want invitations (opted out, or reported this one as spam). In the caller's
    transaction, with the suppression it explains; an accepted invite keeps its answer, and
    any other state changes nothing (``None``)."""
    wanted = [*ANSWERABLE, Status.RECUSADO]
    changes = await conn.run_sync(
        transition_all,
        [
            invites.c.id == invite_id,
            invites.c.kind == INVITE,
            invites.c.status.in_([s.value for s in wanted]),
            # The same reason twice (a repeated one-click POST) is one event, not two.
            (invites.c.error != reason) | invites.c.error.is_(None),
        ],
        {"status": Status.RECUSADO.value, "error": reason, "next_attempt_at": None},
    )
    return changes[0] if changes else None
