"""The one reminder: asked for by the sender (Lembrar) or due by age, claimed once, recorded.

A reminder changes no status: the invite stays ``enviado``. Its own column says where it is
(``reminder_status``: enviando → enviado | falhou | incerto) and its result is an event with
``reminder`` set, so the history and the live pages say it once.

enviado, unanswered, ``REMINDER_AFTER_SECONDS`` old or its occasion a day away (or Lembrar
pressed), the occasion not past ─claim─▶ enviando
enviando ─the mail server took it─▶ enviado;  ─refused─▶ falhou;  ─cut mid-message─▶ incerto
enviando ─the hourly budget is spent─▶ as it was before the claim (a later pass claims it again)
enviando ─claimed longer ago than the sending lease (the worker died)─▶ incerto (the sweep);
never sent again on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, and_, exists, insert, or_, select, update
from sqlalchemy.engine import RowMapping

from app.clock import utcnow
from app.invites.links import live_token
from app.invites.records import INVITE, Change, Invite, record_from
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import invite_events, invite_links, invites

#: How long before a dated occasion its reminder goes, when that comes before
#: REMINDER_AFTER_SECONDS; and how long the invitation must have been out by then.
OCCASION_LEAD = timedelta(days=1)
OCCASION_MIN_WAIT = timedelta(hours=12)


class ReminderStatus(StrEnum):
    SENDING = "enviando"  # claimed; if it stays, it is ambiguous and never re-sent alone
    SENT = "enviado"
    FAILED = "falhou"
    UNCERTAIN = "incerto"


#: The columns a claim changes; a claim given back puts them back as it found them.
_CLAIMED_COLUMNS = (
    invites.c.reminder_status,
    invites.c.reminded_at,
    invites.c.reminder_requested_at,
)


@dataclass(frozen=True)
class Reminder:
    """A claimed reminder: the invite as the claim left it, its live link (``None``: SECRET_KEY
    changed since it was issued, so it cannot be rebuilt), when the invitation ends (its link's
    expiry, or a dated occasion's moment when that comes first), and the reminder's columns as
    the claim found them (for ``give_back``)."""

    invite: Invite
    token: str | None
    expires_at: datetime
    before: RowMapping


def _live_link(now: datetime, ttl_seconds: float) -> Any:
    """The invite has a live link a reminder can carry (rebuildable, not expired)."""
    return exists().where(
        invite_links.c.invite_id == invites.c.id,
        invite_links.c.replaced_at.is_(None),
        invite_links.c.seed.is_not(None),
        invite_links.c.created_at > now - timedelta(seconds=ttl_seconds),
    )


def claimable(now: datetime, after_seconds: float, ttl_seconds: float) -> list[Any]:
    """Sent and unanswered (any answer, cancel, expiry or bounce left ``enviado``), with a live
    link, and either asked for by its sender or never reminded and old enough."""
    due: Any = invites.c.reminder_requested_at.is_not(None)
    if after_seconds > 0:
        aged = or_(
            invites.c.sent_at <= now - timedelta(seconds=after_seconds),
            # A dated occasion that comes first: the reminder goes the day before, if the
            # invitee has had the invitation for a while by then.
            and_(
                invites.c.occasion_at <= now + OCCASION_LEAD,
                invites.c.sent_at <= now - OCCASION_MIN_WAIT,
            ),
        )
        due = or_(due, and_(invites.c.reminded_at.is_(None), aged))
    return [
        invites.c.kind == INVITE,
        invites.c.status == Status.ENVIADO.value,
        due,
        # An occasion already past is not reminded (the sweep expires its invites).
        or_(invites.c.occasion_at.is_(None), invites.c.occasion_at > now),
        _live_link(now, ttl_seconds),
    ]


def _claim_due(
    conn: Connection, after_seconds: float, ttl_seconds: float, key: str, limit: int
) -> list[Reminder]:
    now = utcnow()
    where = claimable(now, after_seconds, ttl_seconds)
    # Locked (PostgreSQL; SQLite's writer holds the whole database) so that the columns read
    # here are still the row's when the UPDATE below claims it: a claim given back restores them.
    candidates = {
        row["id"]: row
        for row in conn.execute(
            select(invites.c.id, *_CLAIMED_COLUMNS)
            .where(*where)
            .order_by(invites.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).mappings()
    }
    if not candidates:
        return []
    # Conditional on the same terms, which the claim itself makes false: of two workers (or a
    # cron run twice) that pick the same row, one UPDATE wins it.
    rows = conn.execute(
        update(invites)
        .where(invites.c.id.in_(list(candidates)), *where)
        .values(
            reminder_status=ReminderStatus.SENDING.value,
            reminded_at=now,
            reminder_requested_at=None,
        )
        .returning(*invites.c)
    ).all()
    claimed = []
    for row in rows:
        invite = record_from(Invite, row)
        link = live_token(conn, invite.id, key)
        assert link is not None, "the claim checked the live link in this transaction"
        token, issued_at = link
        ends = invitation_ends(invite, issued_at, ttl_seconds)
        claimed.append(Reminder(invite, token, ends, candidates[invite.id]))
    return claimed


def invitation_ends(invite: Invite, issued_at: datetime, ttl_seconds: float) -> datetime:
    """When the invitation expires unanswered: ``ttl_seconds`` after its live link was issued,
    or at its dated occasion when that comes first (``expire_unanswered``)."""
    ends = issued_at + timedelta(seconds=ttl_seconds)
    return min(ends, invite.occasion_at) if invite.occasion_at is not None else ends


async def claim_due(
    db: Database, *, after_seconds: float, ttl_seconds: float, key: str, limit: int = 50
) -> list[Reminder]:
    """Claim every reminder due now (``after_seconds`` 0: only those the sender asked for), each
    with its invite's live link rebuilt under ``key`` (SECRET_KEY)."""
    # A suppressed address is never reminded: the sender checks the list before the mail
    # (``app.sending.reminders``) and records the refusal as the reminder's outcome.
    async with db.write() as conn:
        return await conn.run_sync(_claim_due, after_seconds, ttl_seconds, key, limit)


async def request(
    db: Database, sender_id: str, public_id: str, *, min_gap_seconds: float
) -> Invite | None:
    """The sender pressed Lembrar: ``enviado``, not asked already, and not reminded in the last
    ``min_gap_seconds`` (``None`` otherwise). The worker's sweep claims and sends it."""
    now = utcnow()
    async with db.write() as conn:
        row = (
            await conn.execute(
                update(invites)
                .where(
                    invites.c.public_id == public_id,
                    invites.c.sender_id == sender_id,
                    invites.c.kind == INVITE,
                    invites.c.status == Status.ENVIADO.value,
                    invites.c.reminder_requested_at.is_(None),
                    or_(
                        invites.c.reminded_at.is_(None),
                        invites.c.reminded_at <= now - timedelta(seconds=min_gap_seconds),
                    ),
                )
                .values(reminder_requested_at=now)
                .returning(*invites.c)
            )
        ).first()
    return None if row is None else record_from(Invite, row)


def _finish(
    conn: Connection, invite: Invite, outcome: ReminderStatus, error: str | None
) -> Change | None:
    row = conn.execute(
        update(invites)
        .where(
            invites.c.id == invite.id,
            invites.c.reminder_status == ReminderStatus.SENDING.value,
            invites.c.reminded_at == invite.reminded_at,
        )
        .values(reminder_status=outcome.value)
        .returning(*invites.c)
    ).first()
    if row is None:
        return None
    now_invite = record_from(Invite, row)
    return Change(now_invite, _reminder_event(conn, now_invite, outcome, error))


def _reminder_event(
    conn: Connection, invite: Invite, outcome: ReminderStatus, error: str | None
) -> int:
    """The reminder's outcome as an event of the invite (its status unchanged); its id."""
    event_id = conn.execute(
        insert(invite_events)
        .values(
            invite_id=invite.id,
            sender_id=invite.sender_id,
            status=invite.status.value,
            attempt=invite.attempt,
            error=error,
            created_at=utcnow(),
            reminder=outcome.value,
        )
        .returning(invite_events.c.id)
    ).scalar_one()
    return int(event_id)


async def finish(
    db: Database, invite: Invite, outcome: ReminderStatus, error: str | None = None
) -> Change | None:
    """Record what became of the reminder this claim (``invite.reminded_at``) sent, as an event
    of the invite (its status unchanged); ``None`` if that claim is no longer the latest."""
    async with db.write() as conn:
        return await conn.run_sync(_finish, invite, outcome, error)


def _give_back(conn: Connection, claimed: Reminder) -> bool:
    row = conn.execute(
        update(invites)
        .where(
            invites.c.id == claimed.invite.id,
            invites.c.reminder_status == ReminderStatus.SENDING.value,
            invites.c.reminded_at == claimed.invite.reminded_at,
        )
        .values({column.name: claimed.before[column.name] for column in _CLAIMED_COLUMNS})
        .returning(invites.c.id)
    ).first()
    return row is not None


async def give_back(db: Database, claimed: Reminder) -> bool:
    """Undo a claim whose reminder did not leave and should go later (the hourly budget was
    spent): the row is as the claim found it, so a later pass claims it again. No event: for
    the history nothing happened. ``False`` if this claim is no longer the latest."""
    async with db.write() as conn:
        return await conn.run_sync(_give_back, claimed)


def _expire_claims(conn: Connection, lease_seconds: float, reason: str) -> list[Change]:
    now = utcnow()
    rows = conn.execute(
        update(invites)
        .where(
            invites.c.reminder_status == ReminderStatus.SENDING.value,
            invites.c.reminded_at < now - timedelta(seconds=lease_seconds),
        )
        .values(reminder_status=ReminderStatus.UNCERTAIN.value)
        .returning(*invites.c)
    ).all()
    changes = []
    for row in rows:
        invite = record_from(Invite, row)
        changes.append(
            Change(invite, _reminder_event(conn, invite, ReminderStatus.UNCERTAIN, reason))
        )
    return changes


async def expire_claims(db: Database, lease_seconds: float, reason: str) -> list[Change]:
    """Every reminder claimed longer ago than ``lease_seconds`` and still ``enviando`` (its
    worker died mid-send) becomes ``incerto``, with ``reason`` in its history; never re-sent.
    A verdict that commits first wins (``finish`` and this are conditional on ``enviando``)."""
    async with db.write() as conn:
        return await conn.run_sync(_expire_claims, lease_seconds, reason)
