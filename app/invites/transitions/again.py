"""Asking again: the person (or an operator) sends a stopped invite again, with a fresh round.

falhou | incerto | expirado | recusado | cancelado → pendente (the person asks again)
falhou | incerto → pendente (an operator's bulk retry)
devolvido → pendente (the person corrected the address and asks again)

Each re-send replaces the invite's live link in the same transaction: the old mail's link
answers 410 "substituído", and the new attempt's mail carries a new one; the old round's
reminder is forgotten, so the new round gets its own.

None of them sends an invitation to an address its sender already has another invitation on
its way to (``sending.on_its_way``, the new invite's duplicate check): the condition is part of
the conditional UPDATE itself (and on PostgreSQL the sender's lock, ``sending.hold_senders``), so
a resend, a correction, a bulk retry and a new invite to one address cannot both win; the
person hears who is in the way (``Duplicate``), the operator how many rows were left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, exists, select

from app.clock import utcnow
from app.invites.links import replace_links
from app.invites.records import INVITE, Change, Duplicate, Invite, record_from
from app.invites.status import CORRECTABLE, RESENDABLE, RETRYABLE_IN_BULK, Status
from app.invites.transitions.core import transition_all
from app.invites.transitions.sending import hold_senders, mailbox_of, on_its_way, to_mailbox
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


_OTHER = invites.alias("other_invite")


def _no_other_on_its_way(email: str | None) -> Any:
    """The row being sent again (to ``email``, or to its own address when ``None``) is not an
    invitation whose sender has another one on its way to that address: the new invite's
    duplicate check, as a condition of the UPDATE, so the check and the change are one statement
    (on SQLite, the only writer of its moment; on PostgreSQL, see ``sending.hold_senders``)."""
    return ~exists().where(
        # Only an invitation is a duplicate, as at creation (a sign-in mail never is); for any
        # other kind the subquery is empty and the row may go.
        invites.c.kind == INVITE,
        *to_mailbox(_OTHER, invites.c.sender_id, invites.c.email if email is None else email),
        _OTHER.c.id != invites.c.id,
        *on_its_way(_OTHER),
    )


def _resend_rows(conn: Connection, where: list[Any], values: dict[str, Any]) -> list[Change]:
    changes = transition_all(conn, where, values, enqueue=True)
    replace_links(conn, [change.invite.id for change in changes], utcnow())
    return changes


def _in_the_way(conn: Connection, target: list[Any], email: str | None) -> Duplicate | None:
    """Why the resend of the row ``target`` selects changed nothing: ``None`` if the row left
    the states it may be sent again from (a double click's second); else the other invitation on
    its way to the address, which ``_no_other_on_its_way`` refused. Read in the UPDATE's own
    transaction, so it names the invite that was really in the way."""
    row = conn.execute(select(invites).where(*target)).first()
    if row is None:
        return None
    stopped = record_from(Invite, row)
    found = conn.execute(
        select(invites)
        .where(
            *to_mailbox(invites, stopped.sender_id, stopped.email if email is None else email),
            invites.c.id != stopped.id,
            *on_its_way(invites),
        )
        .order_by(invites.c.id)
        .limit(1)
    ).first()
    return Duplicate(record_from(Invite, found)) if found is not None else None


def _resend_one(
    conn: Connection, target: list[Any], email: str | None, values: dict[str, Any]
) -> Change | Duplicate | None:
    found = conn.execute(select(invites.c.sender_id, invites.c.email).where(*target)).first()
    if found is None:
        return None  # not (or no longer) in a state to send again from
    hold_senders(conn, [found.sender_id])
    changes = _resend_rows(conn, [*target, _no_other_on_its_way(email)], values)
    return changes[0] if changes else _in_the_way(conn, target, email)


async def request_resend(db: Database, sender_id: str, public_id: str) -> Change | Duplicate | None:
    """``falhou | incerto | expirado | recusado | cancelado → pendente``: a new attempt, a fresh
    retry budget and a new link; the ``Duplicate`` when the sender has another invitation on its
    way to the address; ``None`` from any other state (a double click's second)."""
    target = [
        invites.c.public_id == public_id,
        invites.c.sender_id == sender_id,
        invites.c.status.in_([s.value for s in RESENDABLE]),
    ]
    async with db.write() as conn:
        return await conn.run_sync(_resend_one, target, None, _resend_values(utcnow()))


@dataclass(frozen=True)
class BulkResend:
    """What an operator's bulk retry did: the rows sent again, and how many rows it chose left
    as they were (their sender has another invitation on its way to the address)."""

    changes: list[Change]
    skipped: int


def _resend_oldest(
    conn: Connection, where: list[Any], limit: int, values: dict[str, Any]
) -> BulkResend:
    chosen = conn.execute(
        select(invites.c.id, invites.c.sender_id, invites.c.email, invites.c.kind)
        .where(*where)
        .order_by(invites.c.id)
        .limit(limit)
    ).all()
    # Of two stopped invitations from one sender to one address only the older goes: the
    # UPDATE's own condition cannot tell, as it reads each row as the statement found it.
    ids: list[int] = []
    taken: set[tuple[str, str]] = set()
    for row in chosen:
        if row.kind == INVITE:
            if mailbox_of(row.sender_id, row.email) in taken:
                continue
            taken.add(mailbox_of(row.sender_id, row.email))
        ids.append(row.id)
    hold_senders(conn, [sender for sender, _ in taken])
    where = [invites.c.id.in_(ids), *where, _no_other_on_its_way(None)]
    changes = _resend_rows(conn, where, values) if ids else []
    in_order = sorted(changes, key=lambda change: change.invite.id)
    return BulkResend(in_order, len(chosen) - len(changes))


async def request_resend_many(
    db: Database,
    status: Status,
    *,
    reason: str | None = None,
    reason_contains: str | None = None,
    limit: int = 1000,
) -> BulkResend:
    """An operator's bulk retry: ``status → pendente`` for every invite in ``status`` (one of
    ``falhou``/``incerto``) whose reason is ``reason`` (exact) or contains ``reason_contains``,
    the oldest ``limit``, in one transaction; an invitation whose sender has another one on its
    way to the address is left out (counted in ``skipped``). The caller publishes the outbox
    rows."""
    if status not in RETRYABLE_IN_BULK:
        raise ValueError(
            f"only {', '.join(RETRYABLE_IN_BULK)} invites can be sent again, not {status}"
        )
    where: list[Any] = [invites.c.status == status.value]
    if reason is not None:
        where.append(invites.c.error == reason)
    if reason_contains is not None:
        where.append(invites.c.error.contains(reason_contains, autoescape=True))
    async with db.write() as conn:
        return await conn.run_sync(_resend_oldest, where, limit, _resend_values(utcnow()))


async def correct_and_resend(
    db: Database, sender_id: str, public_id: str, email: str
) -> Change | Duplicate | None:
    """``devolvido → pendente`` with the address the person corrected: a new attempt, a fresh
    retry budget, its own outbox row; the ``Duplicate`` when the sender has another invitation
    on its way to that address; ``None`` unless still ``devolvido``."""
    target = [
        invites.c.public_id == public_id,
        invites.c.sender_id == sender_id,
        invites.c.status.in_([s.value for s in CORRECTABLE]),
    ]
    values = {**_resend_values(utcnow()), "email": email, "sent_at": None}
    async with db.write() as conn:
        return await conn.run_sync(_resend_one, target, email, values)
